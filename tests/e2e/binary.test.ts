/**
 * Smoke suite of the single binary, built by `npm run build`'s own function (scripts/build.ts)
 * and run with no source tree or node_modules: what a binary user meets. Its command line
 * (--help, --version, an unknown argument that touches nothing, `migrate` on SQLite and
 * PostgreSQL), the first start's banner naming the binary's own CLI, a used port told in one
 * line, the admin API's creates (the bug that existed only in minified builds), the operator
 * CLI, chat JSON and SSE metered against the mock upstream, the API reference, the health
 * probe, and a clean SIGTERM that flushes the ledger.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Database } from "bun:sqlite";
import { SQL } from "bun";
import { buildBinary } from "../../scripts/build";
import { RUNTIME_ENV } from "../../scripts/runtime-env";
import { REPO_ROOT, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { startMockUpstream, type RunningMockUpstream } from "../../packages/mock-upstream/src";
import { checkChatStream } from "../helpers/openrouter-spec";
import { startPostgres } from "../helpers/postgres";
import { MIGRATIONS } from "../../src/store/sqlite/migrations";
import { userIndexPath } from "../../src/store/sqlite/user-index";
import { PG_MIGRATIONS } from "../../src/store/postgres/migrations";
import { version } from "../../package.json";

const ADMIN_TOKEN = "binary-admin-token-0123456789abcdefghijkl";

let dir: string;
let binary: string;
let upstream: RunningMockUpstream;
let db: ReturnType<typeof tempDatabase>;
let server: RunningServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "proxy-binary-"));
  binary = join(dir, "metered-proxy");
  await buildBinary(binary);
  upstream = await startMockUpstream();
  db = tempDatabase();
  server = await startServer({
    databaseUrl: db.databaseUrl,
    command: [binary],
    env: { UPSTREAM_BASE_URL: upstream.url, UPSTREAM_API_KEY: "sk-or-binary", ADMIN_TOKEN, ...RUNTIME_ENV },
  });
});

afterAll(async () => {
  await server?.stop();
  await upstream?.stop();
  db?.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

/** A new empty folder to run the binary in: whatever it creates there is the binary's doing. */
const emptyFolder = () => mkdtempSync(join(dir, "cwd-"));

/**
 * Runs `program` (the binary's path, absolute or as typed relative to `cwd`) with `args` in
 * `cwd`, with only PATH and `env` in its environment: no DATABASE_URL unless given, so the
 * default store would land in `cwd`.
 */
function runBinary(args: string[], cwd: string, env: Record<string, string> = {}, program = binary) {
  const run = Bun.spawnSync([program, ...args], { cwd, env: { PATH: process.env.PATH ?? "", ...env } });
  return { code: run.exitCode, stdout: run.stdout.toString(), stderr: run.stderr.toString() };
}

test("--help names the binary's own commands as it was invoked, exits 0 and creates nothing", () => {
  const cwd = emptyFolder();
  const help = runBinary(["--help"], cwd);
  expect(help.code).toBe(0);
  for (const line of [`${binary} [serve]`, `${binary} cli <command>`, `${binary} migrate`, `${binary} healthcheck`, `${binary} --version`])
    expect(help.stdout).toContain(line);
  expect(help.stdout).not.toContain("npm ");
  // As typed, relative to the working folder: what the user can paste back.
  const relative = runBinary(["--help"], dir, {}, "./metered-proxy");
  expect(relative.stdout).toContain("./metered-proxy cli <command>");
  expect(readdirSync(cwd)).toEqual([]);
});

test("--version prints package.json's version, carried inside the binary", () => {
  const cwd = emptyFolder();
  for (const flag of ["--version", "-v"]) expect(runBinary([flag], cwd)).toEqual({ code: 0, stdout: `${version}\n`, stderr: "" });
  expect(readdirSync(cwd)).toEqual([]);
});

test("an unknown argument exits 2 with the usage, and creates no data folder, database or key", () => {
  const cwd = emptyFolder();
  const mistakes: Array<[string[], string]> = [
    [["bogus"], "bogus"],
    [["--halp"], "--halp"],
    // Settings are environment variables: a flag would otherwise be ignored and the default port used.
    [["serve", "--port", "9000"], "--port"],
    [["migrate", "now"], "now"],
  ];
  for (const [args, reported] of mistakes) {
    const run = runBinary(args, cwd);
    expect({ args, code: run.code, stdout: run.stdout }).toEqual({ args, code: 2, stdout: "" });
    expect(run.stderr).toStartWith(`unknown argument: ${reported}\n`);
    expect(run.stderr).toContain(`usage: ${binary} [serve | migrate | healthcheck | --help | --version]`);
  }
  expect(readdirSync(cwd)).toEqual([]);
});

test("migrate creates and migrates the default SQLite store, creates no app, and is idempotent", () => {
  const cwd = emptyFolder();
  const latest = MIGRATIONS.at(-1)!.version;
  for (let run = 0; run < 2; run++) {
    const migrated = runBinary(["migrate"], cwd);
    expect({ code: migrated.code, stderr: migrated.stderr }).toEqual({ code: 0, stderr: "" });
    expect(JSON.parse(migrated.stdout)).toEqual({ store: "sqlite:data/proxy.sqlite", schemaVersion: latest });
  }
  const db = new Database(join(cwd, "data/proxy.sqlite"), { readonly: true });
  try {
    const versions = db.query<{ version: number }, []>("SELECT version FROM schema_migrations ORDER BY version").all();
    expect(versions.map((v) => v.version)).toEqual(MIGRATIONS.map((m) => m.version));
    expect(db.query<{ n: number }, []>("SELECT count(*) AS n FROM apps").get()!.n).toBe(0);
  } finally {
    db.close();
  }
});

test("migrate applies PostgreSQL's migrations, per DATABASE_URL", async () => {
  const pg = await startPostgres();
  try {
    const url = await pg.createDatabase("migrated_by_binary");
    const cwd = emptyFolder();
    const migrated = runBinary(["migrate"], cwd, { DATABASE_URL: url, SECRETS_KEY: Buffer.alloc(32, 7).toString("base64") });
    expect({ code: migrated.code, stderr: migrated.stderr }).toEqual({ code: 0, stderr: "" });
    const latest = PG_MIGRATIONS.at(-1)!.version;
    expect(JSON.parse(migrated.stdout)).toEqual({ store: `postgres://127.0.0.1:${pg.port}/migrated_by_binary`, schemaVersion: latest });
    const sql = new SQL(url, { max: 1 });
    try {
      const rows: Array<{ version: number }> = await sql`SELECT version FROM schema_migrations ORDER BY version`;
      expect(rows.map((r) => Number(r.version))).toEqual(PG_MIGRATIONS.map((m) => m.version));
    } finally {
      await sql.close({ timeout: 0 });
    }
    expect(readdirSync(cwd)).toEqual([]);
  } finally {
    await pg.destroy();
  }
});

test("the first start's banner names the binary's own CLI, not npm", () => {
  const banner = server.stdout.join("\n");
  expect(banner).toContain("Created a default app on this empty store");
  expect(banner).toContain(`Create more with: ${binary} cli app create --name NAME --origin https://your.site`);
  expect(banner).not.toContain("npm run");
});

test("the CLI's help names the binary too; a group without its command shows the group and exits 2", () => {
  const cwd = emptyFolder();
  const group = runBinary(["cli", "app"], cwd);
  expect(group.code).toBe(2);
  expect(group.stderr).toContain(`usage: ${binary} cli app <command> [options]`);
  expect(group.stderr).toContain("  app create --name NAME");
  expect(runBinary(["cli", "usage", "export", "--help"], cwd).stdout).toContain("--format  jsonl: JSON lines");
  expect(readdirSync(cwd)).toEqual([]);
});

test("a used port: one plain line saying so and what to do, exit 1, no stack trace, no store created", () => {
  const cwd = emptyFolder();
  const run = runBinary([], cwd, { PORT: String(server.port), HOST: "127.0.0.1" });
  expect(run.code).toBe(1);
  expect(run.stderr.trimEnd().split("\n")).toEqual([
    `cannot start: port ${server.port} is in use on 127.0.0.1 (EADDRINUSE): another process listens there. Stop it, or set PORT to a free port.`,
  ]);
  expect(run.stdout).toBe("");
  expect(existsSync(join(cwd, "data/proxy.sqlite"))).toBe(false);
  expect(server.proc.exitCode).toBeNull();
});

const admin = (path: string, init: { method?: string; json?: unknown } = {}) =>
  server.fetch(`/api/v1/admin${path}`, {
    method: init.method ?? "GET",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(init.json !== undefined ? { "content-type": "application/json" } : {}) },
    body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
  });

/** Connects `appUserId` with `secretKey` over HTTP and returns the headers of its chat calls. */
async function connect(secretKey: string, appUserId: string): Promise<Record<string, string>> {
  const auth = { authorization: `Bearer ${secretKey}`, "content-type": "application/json" };
  const { token } = (await (
    await server.fetch("/api/v1/sessions", { method: "POST", headers: auth, body: JSON.stringify({ appUserId, requestLimit: { monthlyUsd: 1 } }) })
  ).json()) as { token: string };
  expect((await server.fetch("/api/v1/connections", { method: "POST", headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
  return { ...auth, "x-service-user": appUserId };
}

const chat = (headers: Record<string, string>, stream: boolean) =>
  server.fetch("/api/v1/chat/completions", {
    method: "POST",
    headers,
    body: JSON.stringify({ model: "openai/gpt-4o-mini", stream, messages: [{ role: "user", content: "hello" }] }),
  });

test("the admin API's creates answer 201 with their secrets, and an unknown app is a 404, not a crash", async () => {
  const created = await admin("/apps", { method: "POST", json: { name: "admin-made", origins: ["https://a.example"] } });
  expect(created.status).toBe(201);
  const app = (await created.json()) as { appId: string; secretKey: string };
  expect(app.secretKey).toStartWith(`sk_live_${app.appId}_`);

  const key = await admin(`/apps/${app.appId}/keys`, { method: "POST" });
  expect(key.status).toBe(201);
  expect(((await key.json()) as { secretKey: string }).secretKey).toStartWith(`sk_live_${app.appId}_`);

  const webhook = await admin(`/apps/${app.appId}/webhooks`, { method: "POST", json: { url: "https://receiver.example/hooks" } });
  expect(webhook.status).toBe(201);
  expect(((await webhook.json()) as { secret: string }).secret).toStartWith("whsec_");

  const unknown = await admin("/apps/appnope/keys", { method: "POST" });
  expect(unknown.status).toBe(404);
  expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe("not_found");

  // The key the admin API made serves a metered call.
  expect((await chat(await connect(app.secretKey, "admin-user"), false)).status).toBe(200);
  expect(server.proc.exitCode).toBeNull();
});

test("the binary's CLI creates an app, and the binary's server serves JSON and streamed calls with it", async () => {
  const cli = Bun.spawnSync([binary, "cli", "app", "create", "--name", "bin"], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "", DATABASE_URL: db.databaseUrl },
  });
  expect(cli.exitCode).toBe(0);
  const { secretKey } = JSON.parse(cli.stdout.toString());
  const headers = await connect(secretKey, "u1");

  const json = await chat(headers, false);
  expect(json.status).toBe(200);
  const completion = (await json.json()) as { choices: Array<{ message: { content: string } }>; usage: { cost: number } };
  expect(completion.choices[0]!.message.content.length).toBeGreaterThan(0);
  expect(completion.usage.cost).toBeGreaterThan(0);

  const res = await chat(headers, true);
  expect(res.status).toBe(200);
  const stream = checkChatStream(await res.text());
  expect(stream.problems).toEqual([]);
  expect(stream.done).toBe(true);

  const usage = (await (await server.fetch("/api/v1/usage?appUserId=u1", { headers })).json()) as { data: Array<{ streamed: boolean }> };
  expect(usage.data.map((r) => r.streamed).sort()).toEqual([false, true]);
  expect((await server.fetch("/healthz")).status).toBe(200);
  const health = Bun.spawnSync([binary, "healthcheck"], { env: { PATH: process.env.PATH ?? "", PORT: String(server.port) } });
  expect(health.exitCode).toBe(0);
});

test("the binary serves the API reference, its renderer's files embedded", async () => {
  const page = await server.fetch("/docs");
  expect(page.status).toBe(200);
  expect(page.headers.get("content-security-policy")).toContain("sandbox allow-scripts");
  const html = await page.text();
  for (const [file, source] of [
    ["/docs/swagger-ui.js", "node_modules/swagger-ui-dist/swagger-ui-bundle.js"],
    ["/docs/swagger-ui.css", "node_modules/swagger-ui-dist/swagger-ui.css"],
  ] as const) {
    expect(html).toContain(`"${file}"`);
    const res = await server.fetch(file);
    expect({ file, status: res.status }).toEqual({ file, status: 200 });
    expect((await res.text()) === (await Bun.file(join(REPO_ROOT, source)).text())).toBe(true);
  }
});

test("the binary runs the SQLite maintenance thread: the served rows reach the per-user index", async () => {
  // The thread is started from its bundled source text (src/store/sqlite/maintenance.ts): a
  // binary that could not start it would still serve, with every row left in the tail.
  const ledger = new Database(db.path, { readonly: true });
  const index = new Database(userIndexPath(db.path), { readonly: true });
  try {
    const last = ledger.query<{ last: number }, []>("SELECT COALESCE(max(rowid), 0) AS last FROM usage_ledger").get()!.last;
    expect(last).toBeGreaterThan(0);
    const mark = () => index.query<{ upto: number }, []>("SELECT upto FROM usage_ledger_by_user_mark").get()!.upto;
    // It indexes a short tail within ten seconds (`indexEveryMs`); the deadline only bounds a failure.
    for (let waited = 0; mark() < last && waited < 20_000; waited += 100) await Bun.sleep(100);
    expect(mark()).toBeGreaterThanOrEqual(last);
  } finally {
    ledger.close();
    index.close();
  }
});

test("started without BUN_CONFIG_MAX_HTTP_REQUESTS, the binary gives it to itself: more than 256 upstream calls at a time, same pid", async () => {
  // Bun reads the setting once, at process start: the binary re-executes itself with it.
  const calls = 300;
  const slow = await startMockUpstream();
  const bare = tempDatabase();
  const env = { UPSTREAM_BASE_URL: slow.url, UPSTREAM_API_KEY: "sk-or-binary-bare", RL_CHAT_LIMIT: "1000", SHUTDOWN_GRACE_MS: "1000" };
  // Empty is unset: the harness would otherwise give it the settings itself.
  const started = await startServer({ databaseUrl: bare.databaseUrl, command: [binary], env: { ...env, BUN_CONFIG_MAX_HTTP_REQUESTS: "" } });
  let client: ReturnType<typeof Bun.spawn> | undefined;
  try {
    const environ = readFileSync(`/proc/${started.proc.pid}/environ`, "utf8").split("\0");
    expect(environ).toContain(`BUN_CONFIG_MAX_HTTP_REQUESTS=${RUNTIME_ENV.BUN_CONFIG_MAX_HTTP_REQUESTS}`);
    expect(started.logLines().some((l) => String(l.msg).startsWith("BUN_CONFIG_MAX_HTTP_REQUESTS is not set"))).toBe(false);

    const keyFile = Bun.spawnSync([binary, "cli", "app", "create", "--name", "bare"], {
      env: { PATH: process.env.PATH ?? "", DATABASE_URL: bare.databaseUrl },
    });
    const { secretKey } = JSON.parse(keyFile.stdout.toString()) as { secretKey: string };
    const auth = { authorization: `Bearer ${secretKey}`, "content-type": "application/json" };
    const session = await started.fetch("/api/v1/sessions", {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ appUserId: "many", requestLimit: { monthlyUsd: 5 } }),
    });
    const { token } = (await session.json()) as { token: string };
    expect((await started.fetch("/api/v1/connections", { method: "POST", headers: { authorization: `Bearer ${token}` } })).status).toBe(200);

    // The calls come from a process of their own, which has the setting (this test's may not):
    // each stalls upstream before its headers, so they are all in flight together.
    const body = JSON.stringify({ model: "openai/gpt-4o-mini", max_tokens: 16, messages: [{ role: "user", content: "wait [[mock stall_before_headers]]" }] });
    const script = `for (let i = 0; i < ${calls}; i++) fetch(${JSON.stringify(`${started.baseUrl}/api/v1/chat/completions`)}, { method: "POST", headers: ${JSON.stringify({ ...auth, "x-service-user": "many" })}, body: ${JSON.stringify(body)} }).catch(() => {}); await new Promise(() => {});`;
    client = Bun.spawn([process.execPath, "-e", script], { env: { PATH: process.env.PATH ?? "", ...RUNTIME_ENV }, stdout: "ignore", stderr: "inherit" });
    // Past 256, a process without the setting would queue them: the wait is bounded by the test's timeout.
    while (slow.mock.served.length < calls) await Bun.sleep(50);
    expect(slow.mock.served.length).toBe(calls);
  } finally {
    client?.kill("SIGKILL");
    await client?.exited;
    await started.stop();
    await slow.stop();
    bare.cleanup();
  }
});

test("SIGTERM: the binary exits 0, says it stopped, and every served call has its ledger row", async () => {
  expect(await server.stop()).toBe(0);
  const stopped = server.logLines().find((l) => l.msg === "stopped");
  expect(stopped).toBeDefined();
  const ledger = new Database(db.path, { readonly: true });
  try {
    const rows = ledger.query<{ n: number }, []>("SELECT count(*) AS n FROM usage_ledger").get()!.n;
    expect(rows).toBe(upstream.mock.served.length);
  } finally {
    ledger.close();
  }
});
