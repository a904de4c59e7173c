/**
 * README.md's "PostgreSQL in five commands without Docker", run as written: its two shell
 * blocks are read from the README itself (so the README and this test cannot drift) and run
 * with bash, then the service (the bundle, as `npm start` runs it) is started with exactly
 * the variables the block exported, and one metered chat call must leave its ledger row in
 * that PostgreSQL.
 *
 * What the test changes, and why:
 * - the `export PROXY_DATA=… PGPORT=… REDIS_PORT=…` line gets a temp folder and free ports,
 *   so nothing touches the machine's own clusters, ports or home folder;
 * - the `apt-get install` line is not run: scripts/test-prerequisites.ts installs the same
 *   packages before `npm test` (checked below);
 * - `npm start` becomes startServer with the block's exported variables.
 * As root (CI), the lines run as the `postgres` user (tests/helpers/postgres.ts userPrefix),
 * since the README asks for an ordinary user: PostgreSQL's server refuses to run as root.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { userPrefix } from "../helpers/postgres";
import { connectOverHttp, freePort, REPO_ROOT, runCliWithEnv, startServer, type RunningServer } from "../helpers/server";

// initdb, migrations and a real server process; bun's own default test timeout is 5 s.
setDefaultTimeout(60_000);

const SECTION = "### PostgreSQL in five commands without Docker";
const INSTALL_LINE = "sudo apt-get install -y postgresql redis-server";
const PLACES_LINE = 'export PROXY_DATA="$HOME/proxy-data" PGPORT=5433 REDIS_PORT=6380';

/** The section's two sh blocks: start everything, and stop PostgreSQL and Redis. */
function readmeBlocks(): { start: string; stop: string } {
  const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  const at = readme.indexOf(SECTION);
  if (at === -1) throw new Error(`README.md: "${SECTION}" was not found`);
  const section = readme.slice(at, readme.indexOf("\n## ", at));
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  if (blocks.length !== 2) throw new Error(`README.md: "${SECTION}" has ${blocks.length} sh blocks, not 2`);
  return { start: blocks[0]!, stop: blocks[1]! };
}

const { start, stop } = readmeBlocks();
const root = mkdtempSync(join(tmpdir(), "proxy-pg-readme-"));
const data = join(root, "proxy-data");
const envFile = join(root, "exported.env");
const places = `export PROXY_DATA="${data}" PGPORT=${freePort()} REDIS_PORT=${freePort()}`;
/** Every name the block exports: what `npm start`, run next in the same shell, would see. */
const exportedNames = [...start.matchAll(/^export (.*)$/gm)].flatMap((m) => [...m[1]!.matchAll(/(?:^|\s)([A-Z_]+)=/g)].map((n) => n[1]!));
let exported: Record<string, string> = {};
let server: RunningServer | undefined;

/** Runs shell text with bash -e in the temp folder, as an unprivileged user; stdout, stderr, exit code. */
async function bash(script: string): Promise<{ code: number; out: string; err: string }> {
  const proc = Bun.spawn([...userPrefix(root), "bash", "-e", "-c", script], {
    cwd: root,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: root },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out, err };
}

/** A pid from a pid file (postgres's postmaster.pid starts with it), or null. */
function pidIn(path: string): number | null {
  if (!existsSync(path)) return null;
  const pid = Number(readFileSync(path, "utf8").split("\n")[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

/** If the test dies before the README's stop block ran: stop both servers, remove the folder. */
function leaveNothingBehind(): void {
  for (const [file, signal] of [
    [join(data, "postgres", "postmaster.pid"), "SIGQUIT"],
    [join(data, "redis.pid"), "SIGTERM"],
  ] as const) {
    const pid = pidIn(file);
    if (pid === null) continue;
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
  rmSync(root, { recursive: true, force: true });
}
process.on("exit", leaveNothingBehind);

beforeAll(async () => {
  // The block's own text, with the three changes the header lists and nothing else.
  expect(start).toContain(INSTALL_LINE);
  expect(start).toContain(PLACES_LINE);
  expect(start.trimEnd().split("\n").at(-1)).toBe("npm start");
  const script = start
    .replace(INSTALL_LINE, ": installed by scripts/test-prerequisites.ts")
    .replace(PLACES_LINE, places)
    .replace(/npm start\s*$/, `env -0 > "${envFile}"\n`);
  const run = await bash(script);
  // Runs clean: no error, and not a warning on stderr.
  expect({ code: run.code, err: run.err }).toEqual({ code: 0, err: "" });
  const env = Object.fromEntries(
    readFileSync(envFile, "utf8")
      .split("\0")
      .filter(Boolean)
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );
  exported = Object.fromEntries(exportedNames.map((name) => [name, env[name] ?? ""]));
});

afterAll(async () => {
  await server?.stop();
  const pgPid = pidIn(join(data, "postgres", "postmaster.pid"));
  const stopped = await bash(
    `${start
      .match(/^export (PROXY_DATA|PGDATA)=.*$/gm)!
      .join("\n")
      .replace(PLACES_LINE, places)}\n${stop}`,
  );
  expect({ code: stopped.code, err: stopped.err }).toEqual({ code: 0, err: "" });
  // pg_ctl stop waits for the server to exit, redis-cli for Redis to close; each removes its pid file on the way out.
  expect(pgPid).not.toBeNull();
  expect(pidIn(join(data, "postgres", "postmaster.pid"))).toBeNull();
  expect(pidIn(join(data, "redis.pid"))).toBeNull();
  process.off("exit", leaveNothingBehind);
  leaveNothingBehind();
});

test("the install line names the packages npm test installs", () => {
  const prerequisites = readFileSync(join(REPO_ROOT, "scripts/test-prerequisites.ts"), "utf8");
  for (const pkg of INSTALL_LINE.split(" ").slice(4)) expect(prerequisites).toContain(`aptPackage: "${pkg}"`);
});

test("the service starts on what the block exported, and a metered call leaves its row in that PostgreSQL", async () => {
  expect(exported.DATABASE_URL).toMatch(/^postgres:\/\/proxy:/);
  expect(exported.REDIS_URL).toMatch(/^redis:\/\/127\.0\.0\.1:/);
  expect(exported.SECRETS_KEY_FILE).toBe(join(data, "secrets.key"));
  const created = await runCliWithEnv(exported, "app", "create", "--name", "without docker");
  expect({ code: created.code, err: created.stderr }).toEqual({ code: 0, err: "" });
  const { secretKey } = created.json[0] as { secretKey: string };

  server = await startServer({ databaseUrl: exported.DATABASE_URL!, env: exported });
  const health = (await (await server.fetch("/healthz")).json()) as { store: { kind: string }; budget: { kind: string }; mode: string };
  expect(health).toMatchObject({ mode: "demo", store: { kind: "postgres" }, budget: { kind: "redis" } });

  await connectOverHttp(server, secretKey, "alice", 5);
  const auth = { authorization: `Bearer ${secretKey}` };
  const res = await server.fetch("/api/v1/chat/completions", {
    method: "POST",
    headers: { ...auth, "content-type": "application/json", "x-service-user": "alice" },
    body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "Say hello" }] }),
  });
  expect(res.status).toBe(200);
  const requestId = res.headers.get("x-request-id")!;
  await res.arrayBuffer();

  const usage = (await (await server.fetch("/api/v1/usage?appUserId=alice", { headers: auth })).json()) as {
    data: Array<{ requestId: string; costUsd: number; status: string }>;
  };
  expect(usage.data).toHaveLength(1);
  expect(usage.data[0]).toMatchObject({ requestId, status: "ok" });
  expect(usage.data[0]!.costUsd).toBeGreaterThan(0);

  // The row is in the README's database itself, read with the README's role and password.
  const sql = new SQL(exported.DATABASE_URL!, { max: 1 });
  try {
    const rows = await sql`SELECT app_user_id, cost_nano FROM usage_ledger WHERE request_id = ${requestId}`;
    expect(rows).toHaveLength(1);
    expect(rows[0].app_user_id).toBe("alice");
    expect(Number(rows[0].cost_nano)).toBe(Math.round(usage.data[0]!.costUsd * 1e9));
  } finally {
    await sql.close({ timeout: 0 });
  }
  // Nothing to worry about at start: the one warning is demo mode's (no UPSTREAM_API_KEY, as
  // the README's `npm start` runs); none about SECRETS_KEY, since the block set SECRETS_KEY_FILE.
  const warnings = server.logLines().filter((line) => line.level !== "info");
  expect(warnings.map((line) => String(line.msg).split(":")[0])).toEqual(["DEMO MODE"]);
  expect(server.stderr).toEqual([]);
});
