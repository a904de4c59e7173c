/**
 * Nothing a route does can end the process: every public and admin route is called on a
 * service whose store fails on purpose (tests/helpers/faulty-service.ts, bundled and run as
 * `npm start` runs the service), past its credentials, so each route's own work fails.
 * Every answer must be an answer (the envelope, or the page's own error page), each
 * internal failure logged once with its request id, nothing left unhandled, and the process
 * still serving at the end. The routes come from the served OpenAPI document, and each
 * must have its request below: a new route fails this test until it is added.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bundleService } from "../../scripts/bundle";
import { REPO_ROOT, startServer, type RunningServer } from "../helpers/server";

const ADMIN_TOKEN = "faulty-admin-token-0123456789abcdefghijkl";
const METRICS_TOKEN = "faulty-metrics-token-0123";
const ORIGIN = "http://localhost:3000";

interface Credentials {
  appId: string;
  secretKey: string;
  sessionToken: string;
}

/** What each route needs beyond its credentials to reach its own work. */
type Extra = { query?: Record<string, string>; headers?: Record<string, string>; body?: unknown };
const grantHeader = { "x-service-grant": `gt_${"a".repeat(40)}` };
const ROUTES: Record<string, (c: Credentials) => Extra> = {
  "get /healthz": () => ({}),
  "get /readyz": () => ({}),
  "get /metrics": () => ({}),
  "post /api/v1/sessions": () => ({ body: { appUserId: "user-1", requestLimit: { monthlyUsd: 5 } } }),
  "post /api/v1/connections": () => ({ body: { monthlyUsd: 5 } }),
  "get /api/v1/connections": () => ({}),
  "delete /api/v1/connections": () => ({}),
  "get /api/v1/connect": (c) => ({ query: { appId: c.appId, origin: ORIGIN, monthlyUsd: "5" } }),
  "post /api/v1/connections/funding": () => ({ body: { monthlyUsd: 5 } }),
  "get /api/v1/connect/funding/callback": () => ({ query: { state: `fs_${"a".repeat(40)}`, code: "code-1" } }),
  "get /api/v1/status": () => ({ query: { appUserId: "user-1" } }),
  "post /api/v1/chat/completions": () => ({
    headers: { "x-service-user": "user-1" },
    body: { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }] },
  }),
  "get /api/v1/grants/consent": (c) => ({ query: { appId: c.appId, usd: "1", origin: ORIGIN } }),
  "post /api/v1/grants/consent": () => ({ headers: { origin: ORIGIN }, body: { consentToken: "ct_0123456789abcdef" } }),
  "get /api/v1/grants/current": () => ({ headers: grantHeader }),
  "delete /api/v1/grants/current": () => ({ headers: grantHeader }),
  "get /api/v1/usage": () => ({ query: { appUserId: "user-1" } }),
  "get /api/v1/models": () => ({}),
  "get /api/v1/models/{author}/{slug}": () => ({}),
  "get /api/v1/grants/popup.js": () => ({}),
  "post /api/v1/admin/apps": () => ({ body: { name: "another", origins: [ORIGIN] } }),
  "get /api/v1/admin/apps": () => ({}),
  "get /api/v1/admin/apps/{appId}": () => ({}),
  "patch /api/v1/admin/apps/{appId}": () => ({ body: { name: "renamed" } }),
  "post /api/v1/admin/apps/{appId}/disable": () => ({}),
  "post /api/v1/admin/apps/{appId}/enable": () => ({}),
  "get /api/v1/admin/apps/{appId}/keys": () => ({}),
  "post /api/v1/admin/apps/{appId}/keys": () => ({}),
  "delete /api/v1/admin/apps/{appId}/keys/{keyId}": () => ({}),
  "get /api/v1/admin/apps/{appId}/connections": () => ({}),
  "get /api/v1/admin/apps/{appId}/connections/{appUserId}": () => ({}),
  "delete /api/v1/admin/apps/{appId}/connections/{appUserId}": () => ({}),
  "get /api/v1/admin/apps/{appId}/grants": () => ({}),
  "delete /api/v1/admin/apps/{appId}/grants/{grantId}": () => ({}),
  "get /api/v1/admin/apps/{appId}/usage": () => ({ query: { from: "2026-01-01", to: "2026-01-31" } }),
  "post /api/v1/admin/apps/{appId}/webhooks": () => ({ body: { url: "https://receiver.example/hooks" } }),
  "get /api/v1/admin/apps/{appId}/webhooks": () => ({}),
  "get /api/v1/admin/apps/{appId}/webhooks/deliveries": () => ({}),
  "delete /api/v1/admin/apps/{appId}/webhooks/{endpointId}": () => ({}),
  "post /api/v1/admin/apps/{appId}/webhooks/{endpointId}/disable": () => ({}),
  "post /api/v1/admin/apps/{appId}/webhooks/{endpointId}/enable": () => ({}),
};

/** The routes whose work does not touch the failing repositories: they answer as usual. */
const OUTSIDE_THE_STORE = [
  "get /healthz",
  "get /readyz",
  "get /metrics",
  "post /api/v1/sessions",
  "get /api/v1/connect",
  "get /api/v1/grants/popup.js",
  "get /api/v1/models/{author}/{slug}",
  "get /api/v1/models",
];

let dir: string;
let server: RunningServer;
let credentials: Credentials;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "proxy-faults-"));
  const bundle = await bundleService(join(REPO_ROOT, "tests/helpers/faulty-service.ts"), dir);
  server = await startServer({
    databaseUrl: "sqlite::memory:",
    command: [process.execPath, bundle],
    env: { ADMIN_TOKEN, METRICS_TOKEN, JWT_SECRET: "faulty-jwt-secret-0123456789abcdefghijklmnop" },
  });
  credentials = JSON.parse(server.stdout.find((line) => line.includes('"sessionToken"'))!) as Credentials;
});

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function credentialFor(security: Array<Record<string, unknown>> | undefined): string | null {
  const schemes = (security ?? []).flatMap((requirement) => Object.keys(requirement));
  if (schemes.includes("secretKey")) return credentials.secretKey;
  if (schemes.includes("sessionToken")) return credentials.sessionToken;
  if (schemes.includes("adminToken")) return ADMIN_TOKEN;
  if (schemes.includes("metricsToken")) return METRICS_TOKEN;
  return null;
}

test("every route of a service whose store fails answers, and the process keeps serving", async () => {
  const spec = (await (await server.fetch("/api/v1/openapi.json")).json()) as {
    paths: Record<string, Record<string, { security?: Array<Record<string, unknown>> }>>;
  };
  const operations = Object.entries(spec.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ method, path, op })));
  expect(operations.map((o) => `${o.method} ${o.path}`).sort()).toEqual(Object.keys(ROUTES).sort());

  const answers: Array<{ route: string; status: number; code: string | null; requestId: string | null }> = [];
  for (const { method, path, op } of operations) {
    const route = `${method} ${path}`;
    const extra = ROUTES[route]!(credentials);
    const url = new URL(path.replace("{appId}", credentials.appId).replace(/\{[A-Za-z]+\}/g, "x0123456789"), server.baseUrl);
    for (const [name, value] of Object.entries(extra.query ?? {})) url.searchParams.set(name, value);
    const credential = credentialFor(op.security);
    const res = await fetch(url, {
      method: method.toUpperCase(),
      headers: {
        ...(credential ? { authorization: `Bearer ${credential}` } : {}),
        ...(extra.body !== undefined ? { "content-type": "application/json" } : {}),
        ...extra.headers,
      },
      body: extra.body !== undefined ? JSON.stringify(extra.body) : undefined,
    });
    const type = res.headers.get("content-type") ?? "";
    const text = await res.text();
    let code: string | null = null;
    if (res.status >= 400 && type.includes("application/json") && !["/healthz", "/readyz"].includes(path)) {
      const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
      expect({ route, envelope: typeof body.error?.code === "string" && typeof body.error?.message === "string" }).toEqual({ route, envelope: true });
      code = String(body.error!.code);
    }
    answers.push({ route, status: res.status, code, requestId: res.headers.get("x-request-id") });
  }

  // The faults were reached: every route that uses the store failed inside it (500, or
  // 503 where a dependency that budgets need is down), each in the one envelope.
  expect(answers.filter((a) => a.status < 500).map((a) => a.route)).toEqual(OUTSIDE_THE_STORE);
  const failed = answers.filter((a) => a.status >= 500);
  for (const a of failed)
    if (a.code !== null) expect({ route: a.route, code: a.code }).toEqual({ route: a.route, code: a.status === 503 ? "unavailable" : "internal" });

  // Each internal failure was logged once, with its request id; nothing went unhandled.
  await Bun.sleep(50); // the logger writes a turn's lines together at the turn's end
  const logs = server.logLines();
  for (const a of failed.filter((x) => x.code === "internal")) {
    expect({ route: a.route, logged: logs.filter((l) => l.msg === "unhandled error" && l.requestId === a.requestId).length }).toEqual({
      route: a.route,
      logged: 1,
    });
  }
  expect(logs.filter((l) => String(l.msg).includes("nothing handled it") || String(l.msg).includes("nothing caught it"))).toEqual([]);
  expect(server.stderr.join("\n")).not.toContain("error:");

  expect(server.proc.exitCode).toBeNull();
  expect((await server.fetch("/readyz")).status).toBeLessThan(600);
  expect((await server.fetch("/healthz")).status).toBe(200);
});
