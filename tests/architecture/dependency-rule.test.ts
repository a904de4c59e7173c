/**
 * ARCHITECTURE.md §5 "The dependency rule", checked over src/'s import graph: every file stands
 * on a floor, no import reaches up a floor, and no import cycle spans two folders (a cycle
 * inside one folder is that folder's own business).
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/server";
import { importCycles, importEdges, importSpecifiers, sourceFiles } from "./import-graph";
import { floorOf, readDependencyRule, topFolder } from "./dependency-rule";

const floors = readDependencyRule(REPO_ROOT);
const files = sourceFiles(REPO_ROOT, "src");
const edges = importEdges(REPO_ROOT, files);

describe("the dependency rule", () => {
  test("names real folders and files, each once", () => {
    const paths = floors.flatMap((floor) => floor.paths);
    expect(new Set(paths).size).toBe(paths.length);
    const unused = paths.filter((path) => !files.some((file) => (path.endsWith("/") ? file.startsWith(path) : file === path)));
    expect(unused).toEqual([]);
  });

  test("every source file stands on a floor", () => {
    expect(files.filter((file) => !floorOf(floors, file))).toEqual([]);
  });

  test("no import reaches a floor above its own", () => {
    const upward = edges
      .filter(({ to }) => to.startsWith("src/"))
      .map(({ from, to }) => ({ from, to, fromFloor: floorOf(floors, from), toFloor: floorOf(floors, to) }))
      .filter(({ fromFloor, toFloor }) => fromFloor && toFloor && toFloor.level > fromFloor.level)
      .map(({ from, to, fromFloor, toFloor }) => `${from} (${fromFloor!.name}) imports ${to} (${toFloor!.name})`);
    expect(upward).toEqual([]);
  });

  test("no import cycle spans two folders", () => {
    const spanning = importCycles(edges).filter((cycle) => new Set(cycle.map(topFolder)).size > 1);
    expect(spanning).toEqual([]);
  });

  test("the product reaches outside src/ only for its version and, in demo mode, the mock upstream", () => {
    const outside = edges.filter(({ to }) => !to.startsWith("src/")).map(({ from, to }) => `${from} imports ${to}`);
    expect(outside.sort()).toEqual([
      "src/launch/help.ts imports package.json",
      "src/upstream/demo-upstream.ts imports packages/mock-upstream/src/index.ts",
      "src/upstream/demo-upstream.ts imports packages/mock-upstream/src/index.ts",
    ]);
  });
});

describe("per-request state", () => {
  // A request's state travels in its RequestContext (src/request/context.ts), passed on
  // explicitly; a map keyed by the Request beside it is the side channel this replaced.
  test("no module keeps a map keyed by the request", () => {
    const keyedByRequest = files.filter((file) => /(?:Weak)?Map<\s*Request\b/.test(readFileSync(join(REPO_ROOT, file), "utf8")));
    expect(keyedByRequest).toEqual([]);
  });
});

describe("the import reader", () => {
  // The graph is only as good as the reading of imports: each form is seen, comments are not.
  test("sees static, type-only, re-exported, side-effect, dynamic and required imports, and not commented ones", () => {
    const source = [
      'import { a } from "./a";',
      'import type { B } from "./b";',
      'export { c } from "./c";',
      'import "./d";',
      'const e = await import("./e");',
      'const f = require("./f");',
      'import {\n  g,\n  type G,\n} from "./g";',
      '// import { h } from "./h";',
      '/* import { i } from "./i"; */',
    ].join("\n");
    expect(importSpecifiers(source).sort()).toEqual(["./a", "./b", "./c", "./d", "./e", "./f", "./g"]);
  });

  test("finds a cycle, and none in a chain", () => {
    const chain = [
      { from: "a", to: "b" },
      { from: "b", to: "c" },
    ];
    expect(importCycles(chain)).toEqual([]);
    expect(importCycles([...chain, { from: "c", to: "a" }])).toEqual([["a", "b", "c"]]);
  });
});
