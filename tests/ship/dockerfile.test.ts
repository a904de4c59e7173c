import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../helpers/server";

// No Docker daemon runs here, so the image is checked by a linter and by reading it: it
// must keep building the binary the way `npm run build` does, and keep the run-time rules.
const dockerfile = readFileSync(join(REPO_ROOT, "Dockerfile"), "utf8");
const instructions = dockerfile.split("\n").filter((l) => /^[A-Z]+\s/.test(l));

describe("Dockerfile", () => {
  test("dockerfilelint finds no issue", () => {
    const lint = Bun.spawnSync([process.execPath, join(REPO_ROOT, "node_modules/dockerfilelint/bin/dockerfilelint"), "-o", "json", "Dockerfile"], {
      cwd: REPO_ROOT,
    });
    const report = JSON.parse(lint.stdout.toString());
    expect(report.files[0].issues).toEqual([]);
  });

  test("is multi-stage and builds the binary with the project's own build script", () => {
    expect(instructions.filter((l) => l.startsWith("FROM ")).length).toBe(2);
    expect(dockerfile).toContain("RUN npm run build");
    const buildScript = readFileSync(join(REPO_ROOT, "scripts/build.ts"), "utf8");
    const outfile = /const outfile = "([^"]+)"/.exec(buildScript)![1]!;
    expect(dockerfile).toContain(`cp ${outfile} /out/metered-proxy`);
  });

  test("the build stage installs with an npm that honours package.json's allowScripts (11.16 or later), before npm ci", () => {
    // Node's own npm is 10 on node:20 (and on 22): it would run every install script, the refused ones too.
    const build = instructions.slice(
      0,
      instructions.findIndex((l, i) => i > 0 && l.startsWith("FROM ")),
    );
    expect(build[0]).toMatch(/^FROM node:20-/);
    const upgrade = build.findIndex((l) => /^RUN npm install --global\b.* npm@\S+$/.test(l));
    const ci = build.findIndex((l) => l.startsWith("RUN npm ci"));
    expect(upgrade).toBeGreaterThan(-1);
    expect(upgrade).toBeLessThan(ci);
    const version = /npm@(\S+)$/.exec(build[upgrade]!)![1]!;
    // An exact version, so every build gets the same npm; 12 changes the defaults again.
    expect(Bun.semver.satisfies(version, ">=11.16.0 <12")).toBe(true);
    expect(version).toMatch(/^\d+\.\d+\.\d+$/);
    const { allowScripts } = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { allowScripts: Record<string, boolean> };
    expect(allowScripts["@openrouter/sdk"]).toBe(false);
  });

  test("runs as a non-root user with data on a volume, a health check and SIGTERM", () => {
    const user = instructions.find((l) => l.startsWith("USER "))!;
    expect(user).toBeDefined();
    expect(user).not.toMatch(/USER\s+(root|0)\b/);
    expect(instructions.some((l) => l.startsWith("VOLUME ") && l.includes("/data"))).toBe(true);
    expect(dockerfile).toContain("DATABASE_URL=sqlite:/data/proxy.sqlite");
    expect(dockerfile).toMatch(/HEALTHCHECK[^\n]*\\\n\s+CMD \["\/usr\/local\/bin\/metered-proxy", "healthcheck"\]/);
    expect(instructions).toContain("STOPSIGNAL SIGTERM");
    expect(dockerfile).toContain("BUN_CONFIG_MAX_HTTP_REQUESTS=");
  });
});
