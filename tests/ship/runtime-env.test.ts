/**
 * Bun's runtime settings (src/launch/runtime-env.ts) are environment variables read once, at
 * start, so they reach the service only where it is started, or by its re-executing itself
 * with them. This checks that the Dockerfile sets the same ones and the README lists them
 * (`npm start` itself is checked on its running process in npm-start.test.ts), and that this Bun still honours the
 * optional garbage-collector setting the README offers: an unknown `BUN_JSC_` name would be
 * ignored without a word.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/server";
import { RUNTIME_ENV } from "../../scripts/runtime-env";
import { missingRuntimeEnv } from "../../src/launch/runtime-env";

const settings = Object.entries(RUNTIME_ENV);
const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");

describe("Bun's runtime settings", () => {
  test("the Dockerfile's ENV sets each of them", () => {
    const dockerfile = readFileSync(join(REPO_ROOT, "Dockerfile"), "utf8");
    const env = /^ENV ((?:.*\\\n)*.*)$/m.exec(dockerfile)![1]!;
    for (const [name, value] of settings) expect(env).toMatch(new RegExp(`\\b${name}=${value}(\\s|$)`));
  });

  test("the README's configuration table lists each with its value; the single binary needs none of them typed (it re-executes itself with them)", () => {
    const binarySection = readme.slice(readme.indexOf("## Single binary and container"));
    const commands = binarySection.slice(0, binarySection.indexOf("```", binarySection.indexOf("```sh") + 5));
    for (const [name, value] of settings) {
      expect(commands).not.toContain(`${name}=`);
      expect(readme).toContain(`| \`${name}\` | \`${value}\` (set by \`npm start\`) | `);
    }
    // tests/e2e/binary.test.ts starts the binary without them and counts its upstream calls at a time.
    expect(missingRuntimeEnv({})).toEqual(RUNTIME_ENV);
    expect(missingRuntimeEnv({ ...RUNTIME_ENV })).toEqual({});
  });

  test("the README's optional BUN_JSC_useGenerationalGC=0 makes every collection a full one (JavaScriptCore's own GC log)", () => {
    expect(readme).toContain("| `BUN_JSC_useGenerationalGC` | unset | optional: `0` makes every garbage collection a full one");
    // BUN_JSC_logGC=1 has JavaScriptCore log each collection with its kind.
    const collections = (extra: Record<string, string>) => {
      const run = Bun.spawnSync(
        [process.execPath, "-e", "const kept = []; for (let i = 0; i < 3e6; i++) { const o = { i, list: [i] }; if (i % 100 === 0) kept.push(o); }"],
        {
          env: { PATH: process.env.PATH ?? "", BUN_JSC_logGC: "1", ...extra },
        },
      );
      const log = run.stdout.toString() + run.stderr.toString();
      return { eden: (log.match(/=> EdenCollection/g) ?? []).length, full: (log.match(/=> FullCollection/g) ?? []).length };
    };
    const generational = collections({});
    expect(generational.eden).toBeGreaterThan(0);
    const nonGenerational = collections({ BUN_JSC_useGenerationalGC: "0" });
    expect(nonGenerational.eden).toBe(0);
    expect(nonGenerational.full).toBeGreaterThan(0);
  });
});
