/**
 * Smoke suite of the single binary, built by `npm run build`'s own function (scripts/build.ts)
 * and run with no source tree or node_modules: what a binary user meets. The admin API's
 * creates (the bug that existed only in minified builds), the operator CLI, chat JSON and
 * SSE metered against the mock upstream, the API reference, the health probe, and a clean
 * SIGTERM that flushes the ledger.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Database } from "bun:sqlite";
import { buildBinary } from "../../scripts/build";
import { RUNTIME_ENV } from "../../scripts/runtime-env";
import { REPO_ROOT, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { startMockUpstream, type RunningMockUpstream } from "../../src/upstream/mock";
import { checkChatStream } from "../helpers/openrouter-spec";

const ADMIN_TOKEN = "binary-admin-token-0123456789abcdefghijkl";

let dir: string;
let binary: string;
let upstream: RunningMockUpstream;
let db: ReturnType<typeof tempDatabase>;
let server: RunningServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "proxy-binary-"));
  binary = join(dir, "metered-proxy");
  buildBinary(binary);
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
