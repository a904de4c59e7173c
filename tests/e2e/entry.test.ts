/**
 * The bundle `npm start` runs has the single binary's command line (tests/e2e/binary.test.ts
 * covers the binary): --help and --version, an unknown argument that exits 2 and touches
 * nothing, `migrate`; and start-up failures an operator can fix (a used port, bad settings)
 * told in one plain line with the exit status, never the minified bundle's source around a
 * stack trace.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Database } from "bun:sqlite";
import { version } from "../../package.json";
import { MIGRATIONS } from "../../src/store/sqlite/migrations";
import { freePort, runServerToExit, serviceCommand, tempDatabase } from "../helpers/server";

const folders: string[] = [];
afterAll(() => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

/** Runs the bundle with `args` in a new empty folder, with only PATH in its environment (so the default store would land there). */
async function runBundle(args: string[], env: Record<string, string> = {}) {
  const cwd = mkdtempSync(join(tmpdir(), "proxy-entry-"));
  folders.push(cwd);
  const proc = Bun.spawn([...(await serviceCommand()), ...args], { cwd, env: { PATH: process.env.PATH ?? "", ...env }, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr, cwd };
}

test("--help names the checkout's commands (npm start, npm run cli --), --version the package's; neither touches a file", async () => {
  const help = await runBundle(["--help"]);
  expect(help.code).toBe(0);
  for (const line of ["npm start [serve]", "npm run cli -- <command>", "npm start -- migrate", "npm start -- healthcheck"]) expect(help.stdout).toContain(line);
  expect(readdirSync(help.cwd)).toEqual([]);
  const shown = await runBundle(["--version"]);
  expect({ code: shown.code, stdout: shown.stdout }).toEqual({ code: 0, stdout: `${version}\n` });
  expect(readdirSync(shown.cwd)).toEqual([]);
});

test("started by Bun's own `bun start`, the help names Bun's commands", async () => {
  const help = await runBundle(["--help"], { npm_config_user_agent: "bun/1.4.5 npm/? node/v24.3.0 linux x64" });
  expect(help.stdout).toContain("bun start [serve]");
  expect(help.stdout).toContain("bun run cli <command>");
});

test("an unknown argument exits 2 with the usage and creates nothing", async () => {
  const run = await runBundle(["--port", "9000"]);
  expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 2, stdout: "" });
  expect(run.stderr).toStartWith("unknown argument: --port\nusage: npm start -- [serve | migrate | healthcheck | --help | --version]");
  expect(run.stderr).toContain("Settings are environment variables (PORT=9000 npm start)");
  expect(readdirSync(run.cwd)).toEqual([]);
});

test("migrate applies the store's migrations and exits 0, without serving or creating an app", async () => {
  const run = await runBundle(["migrate"]);
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: "" });
  expect(JSON.parse(run.stdout)).toEqual({ store: "sqlite:data/proxy.sqlite", schemaVersion: MIGRATIONS.at(-1)!.version });
  const db = new Database(join(run.cwd, "data/proxy.sqlite"), { readonly: true });
  try {
    expect(db.query<{ n: number }, []>("SELECT count(*) AS n FROM apps").get()!.n).toBe(0);
  } finally {
    db.close();
  }
});

test("a used port: one plain line with the fix, exit 1, before the store is opened", async () => {
  const port = freePort();
  // Another program on the port: a plain TCP listener this test holds.
  const other = Bun.listen({ hostname: "127.0.0.1", port, socket: { data() {} } });
  const scratch = tempDatabase();
  try {
    const run = await runServerToExit({ PORT: String(port), HOST: "127.0.0.1", DATABASE_URL: scratch.databaseUrl });
    expect(run.code).toBe(1);
    expect(run.stderr.trimEnd().split("\n")).toEqual([
      `cannot start: port ${port} is in use on 127.0.0.1 (EADDRINUSE): another process listens there. Stop it, or set PORT to a free port.`,
    ]);
    // Not migrated, and no default app whose key would be printed by a process that cannot serve it;
    // not even the store's lock file, or the folder it would be in.
    expect(run.stdout).toBe("");
    expect(existsSync(join(scratch.dir, "data"))).toBe(false);
  } finally {
    other.stop(true);
    scratch.cleanup();
  }
});

test("bad settings: one plain line naming each and what to do, exit 2", async () => {
  const scratch = tempDatabase();
  try {
    const run = await runServerToExit({ PORT: "abc", MAX_MONTHLY_USD: "-1", DATABASE_URL: scratch.databaseUrl });
    expect(run.code).toBe(2);
    expect(run.stderr.trimEnd().split("\n")).toEqual([
      'cannot start: invalid configuration: PORT: Expected integer (got "abc"); MAX_MONTHLY_USD: Expected number to be greater than 0 (got -1). ' +
        'Fix the environment variables named and start again (the README\'s "Configuration" lists every setting).',
    ]);
    expect(run.stdout).toBe("");
    expect(existsSync(join(scratch.dir, "data"))).toBe(false);
  } finally {
    scratch.cleanup();
  }
});
