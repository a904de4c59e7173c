/**
 * System packages the suite needs beyond npm ones. Installed on demand so that `npm test`
 * alone prepares a fresh machine of this kind (Debian, root); elsewhere it says what is
 * missing instead.
 */
import { existsSync, readdirSync } from "node:fs";

const REQUIRED: Array<{ binary: string; aptPackage: string; present?: () => boolean }> = [
  // tests/helpers/redis.ts starts a real redis-server per suite (rate limits, shared budgets)
  { binary: "redis-server", aptPackage: "redis-server" },
  // tests/e2e/grants-browser.test.ts and docs-offline.test.ts drive Debian's headless Chromium through playwright-core
  { binary: "chromium", aptPackage: "chromium" },
  // tests/helpers/postgres.ts runs its own cluster; Debian keeps these binaries off PATH,
  // in /usr/lib/postgresql/<version>/bin
  { binary: "initdb", aptPackage: "postgresql", present: () => !!Bun.which("initdb") || debianPostgresInstalled() },
];

function debianPostgresInstalled(): boolean {
  const base = "/usr/lib/postgresql";
  return existsSync(base) && readdirSync(base).some((version) => existsSync(`${base}/${version}/bin/initdb`));
}

export async function ensureTestPrerequisites(): Promise<void> {
  const missing = REQUIRED.filter(({ binary, present }) => !(present ? present() : Bun.which(binary)));
  if (missing.length === 0) return;
  const packages = missing.map((m) => m.aptPackage);
  if (!Bun.which("apt-get")) {
    throw new Error(`tests need ${packages.join(", ")}; install them with your package manager`);
  }
  console.log(`installing ${packages.join(", ")} with apt-get for the test suite...`);
  for (const args of [
    ["update", "-qq"],
    ["install", "-y", "-qq", "--no-install-recommends", ...packages],
  ]) {
    const result = Bun.spawnSync(["apt-get", ...args], { stdout: "inherit", stderr: "inherit", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
    if (result.exitCode !== 0) throw new Error(`apt-get ${args[0]} failed with ${result.exitCode}`);
  }
}
