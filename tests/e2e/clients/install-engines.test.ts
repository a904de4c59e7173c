/**
 * `npm install` on a supported Node prints no EBADENGINE and no ERESOLVE warning (README
 * "The two commands"), read off package-lock.json, which is what `npm install` and `npm ci`
 * install: every Node version that the root's `engines` admits is admitted by every package
 * in the lock (the test clients' newer majors ask for Node 22, so they are pinned to the
 * last releases that do not), and every package's peer dependencies resolve to a version in
 * their range. A fresh install that does print either warning is a lock this test fails.
 * npm 11 also warns on every install about dependencies whose install scripts nobody has
 * allowed or refused yet (package.json `allowScripts`): each one in the lock has a verdict.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../../helpers/server";

interface LockEntry {
  version?: string;
  engines?: { node?: string } | string[];
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  optional?: boolean;
  hasInstallScript?: boolean;
}

const lock = JSON.parse(readFileSync(join(REPO_ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, LockEntry> };
const root = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { engines: { node: string }; allowScripts?: Record<string, boolean> };
const rootEngines = root.engines.node;

/** The first release of each Node line from 18 to 26, and the minors around the floors that packages here set (ESLint: 20.19 and 22.13). */
const NODE_RELEASES = ["18.20.0", "20.0.0", "20.18.0", "20.19.0", "21.0.0", "22.0.0", "22.12.0", "22.13.0", "23.0.0", "24.0.0", "25.0.0", "26.0.0"];

/** The installed package a peer name resolves to from the package at `path`: the nearest node_modules up the tree. */
function resolvePeer(path: string, peer: string): LockEntry | undefined {
  let base = path;
  for (;;) {
    const found = lock.packages[`${base ? `${base}/` : ""}node_modules/${peer}`];
    if (found) return found;
    if (!base) return undefined;
    const parent = base.lastIndexOf("/node_modules/");
    base = parent < 0 ? "" : base.slice(0, parent);
  }
}

describe("npm install on a supported Node: no EBADENGINE, no ERESOLVE", () => {
  test("this machine's Node is one the root's engines admit", () => {
    expect(Bun.semver.satisfies(process.versions.node ?? "", rootEngines)).toBe(true);
  });

  test("every package in the lock admits every Node release the root's engines admit", () => {
    const supported = [...NODE_RELEASES, process.versions.node ?? ""].filter((v) => Bun.semver.satisfies(v, rootEngines));
    expect(supported.length).toBeGreaterThan(0);
    const refusing = Object.entries(lock.packages).flatMap(([path, entry]) => {
      const range = !entry.engines || Array.isArray(entry.engines) ? undefined : entry.engines.node;
      if (!path || !range) return [];
      return supported.filter((v) => !Bun.semver.satisfies(v, range)).map((v) => `${path} (${range}) refuses Node ${v}`);
    });
    expect(refusing).toEqual([]);
  });

  test("every package's peer dependencies resolve within their ranges (optional ones may be absent)", () => {
    const broken = Object.entries(lock.packages).flatMap(([path, entry]) =>
      Object.entries(entry.peerDependencies ?? {}).flatMap(([peer, range]) => {
        const installed = resolvePeer(path, peer);
        if (!installed) return entry.peerDependenciesMeta?.[peer]?.optional || entry.optional ? [] : [`${path} needs ${peer}@${range}: absent`];
        return Bun.semver.satisfies(installed.version ?? "", range) ? [] : [`${path} needs ${peer}@${range}: ${installed.version}`];
      }),
    );
    expect(broken).toEqual([]);
  });

  test("every dependency with an install script is allowed or refused in package.json's allowScripts", () => {
    const verdicts = Object.keys(root.allowScripts ?? {}).map((entry) => entry.replace(/(.)@[^@]*$/, "$1"));
    const unreviewed = Object.entries(lock.packages)
      .filter(([path, entry]) => path && entry.hasInstallScript)
      .map(([path]) => path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length))
      .filter((name) => !verdicts.includes(name));
    expect(unreviewed).toEqual([]);
  });
});
