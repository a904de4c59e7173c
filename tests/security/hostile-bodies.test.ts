/**
 * Hostile bodies on every route that takes one, against a real server process (the bundle
 * `npm start` runs): nesting 10^5 deep, 10^6 values, 4 MB strings, huge numbers, invalid
 * UTF-8, wrong content types, declared and chunked. The promises: no 5xx, every error in
 * the envelope, the process stays up, and /healthz, polled throughout from this process,
 * keeps answering in under 100 ms (issue 30: one 200 KB body used to block every tenant for
 * seconds). The shapes past a bound must be refused with the bound named.
 *
 * The routes come from the app itself (`app.routes` of an app built from the same source),
 * so a new route is covered without editing this file. Each route's credential is found by
 * probing: the first of (admin token, secret key, session token, none) with which a small
 * over-deep body is refused for its depth is the one that reaches body parsing; a route that
 * none reaches fails the test instead of passing without its body ever being read.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { cliCreateApp, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { ADMIN_TOKEN, makeAdminTestApp } from "../helpers/admin";
import { MAX_JSON_DEPTH } from "../../src/http/json-bounds";
import { hostileShapes, nested, schemaShapes, type HostileShape } from "../helpers/hostile-shapes";

setDefaultTimeout(120_000);

/** The bound issue 30 sets on /healthz while hostile bodies are being answered. */
const HEALTHZ_BOUND_MS = 100;
const TOO_DEEP = `request body nests deeper than ${MAX_JSON_DEPTH} levels`;

let server: RunningServer;
let db: ReturnType<typeof tempDatabase>;
let credentials: Record<string, string | null>;
let pathParams: Record<string, string>;
let shapes: HostileShape[];

/** Every route that can carry a body (GET and HEAD cannot), as the app declares them, with its body schema. */
const routes = makeAdminTestApp()
  .app.routes.filter((route) => !["GET", "HEAD"].includes(route.method))
  .map((route) => ({ method: route.method, path: route.path, schema: (route.hooks as { body?: unknown }).body }));

/** The poll of /healthz: how many answered, which did not answer 200, the slowest with what was being sent meanwhile. */
const healthz = { polls: 0, failures: [] as string[], slowest: [] as Array<{ ms: number; during: string }>, running: true, loop: Promise.resolve() };

beforeAll(async () => {
  db = tempDatabase();
  server = await startServer({
    databaseUrl: db.databaseUrl,
    env: {
      ADMIN_TOKEN,
      RL_CHAT_LIMIT: "1000000",
      RL_SESSIONS_LIMIT: "1000000",
      RL_ADMIN_AUTH_LIMIT: "1000000",
      RL_CONSENT_APP_LIMIT: "1000000",
      RL_CONSENT_IP_LIMIT: "1000000",
      RL_GRANTS_APP_LIMIT: "1000000",
      RL_GRANTS_IP_LIMIT: "1000000",
    },
  });
  const app = await cliCreateApp(db.databaseUrl, "hostile", ["http://localhost:3000"]);
  const session = await server.fetch("/api/v1/sessions", {
    method: "POST",
    headers: { authorization: `Bearer ${app.secretKey}`, "content-type": "application/json" },
    body: JSON.stringify({ appUserId: "alice", requestLimit: { monthlyUsd: 5 } }),
  });
  expect(session.status).toBe(200);
  credentials = { admin: ADMIN_TOKEN, secretKey: app.secretKey, session: ((await session.json()) as { token: string }).token, none: null };
  pathParams = { appId: app.appId, keyId: app.keyId };
  // Built before the poll starts, so this process's own work does not delay it.
  shapes = hostileShapes();
  healthz.loop = pollHealthz();
});

afterAll(async () => {
  healthz.running = false;
  await healthz.loop;
  expect(await server.stop()).toBe(0);
  db.cleanup();
});

async function pollHealthz(): Promise<void> {
  while (healthz.running) {
    const started = performance.now();
    const during = current;
    const res = await server.fetch("/healthz");
    await res.arrayBuffer();
    const ms = performance.now() - started;
    healthz.polls++;
    if (res.status !== 200) healthz.failures.push(`${res.status} during ${during}`);
    healthz.slowest = [...healthz.slowest, { ms, during: during === current ? during : `${during}, then ${current}` }].sort((a, b) => b.ms - a.ms).slice(0, 5);
    await Bun.sleep(5);
  }
}

/** What is being sent, for the slowest polls' report. */
let current = "(nothing yet)";

function urlOf(path: string): string {
  return path.replace(/:(\w+)/g, (_, name: string) => pathParams[name] ?? `no-such-${name}`);
}

async function send(method: string, path: string, credential: string | null, shape: HostileShape): Promise<{ status: number; text: string }> {
  current = `${method} ${path} ${shape.name}`;
  const headers: Record<string, string> = { "x-service-user": "alice", "x-service-grant": "gt_" + "a".repeat(40), ...shape.headers };
  if (credential !== null) headers.authorization = `Bearer ${credential}`;
  const res = await server.fetch(urlOf(path), { method, headers, body: shape.body(), duplex: "half" } as RequestInit);
  return { status: res.status, text: await res.text() };
}

/** No 5xx, and every error in the one envelope. */
function expectServiceAnswer(where: string, res: { status: number; text: string }): void {
  expect({ where, status: res.status < 500 ? "below 500" : res.status, text: res.text.slice(0, 300) }).toMatchObject({ where, status: "below 500" });
  if (res.status >= 400) {
    const body = JSON.parse(res.text) as { error?: { code?: unknown; message?: unknown } };
    expect({ where, code: typeof body.error?.code, message: typeof body.error?.message }).toEqual({ where, code: "string", message: "string" });
  }
}

describe("hostile bodies on every route", () => {
  test("the app declares routes with bodies, public and admin", () => {
    expect(routes.length).toBeGreaterThan(10);
    expect(routes.some((r) => r.path.startsWith("/api/v1/admin/"))).toBe(true);
    expect(routes.some((r) => r.path === "/api/v1/chat/completions")).toBe(true);
  });

  for (const { method, path, schema } of routes) {
    test(`${method} ${path}${schema ? ", and bodies aimed at its schema" : ""}`, async () => {
      const probe: HostileShape = { name: "probe", headers: { "content-type": "application/json" }, body: () => nested(MAX_JSON_DEPTH + 1) };
      let reading: string | undefined;
      for (const [kind, credential] of Object.entries(credentials)) {
        const res = await send(method, path, credential, probe);
        expectServiceAnswer(`${kind} probe`, res);
        if (res.status === 400 && res.text.includes(TOO_DEEP)) {
          reading = kind;
          break;
        }
      }
      expect({ route: `${method} ${path}`, reading }).toEqual({ route: `${method} ${path}`, reading: expect.any(String) });
      const aimed = typeof schema === "object" && schema !== null ? schemaShapes(schema) : [];
      for (const shape of [...shapes, ...aimed]) {
        const res = await send(method, path, credentials[reading!] ?? null, shape);
        expectServiceAnswer(shape.name, res);
        if (shape.expect)
          expect({ shape: shape.name, status: res.status, text: res.text }).toEqual({
            shape: shape.name,
            status: shape.expect.status,
            text: expect.stringContaining(shape.expect.message),
          });
      }
      expect(server.proc.exitCode).toBeNull();
    });
  }

  test(`/healthz answered in under ${HEALTHZ_BOUND_MS} ms throughout, and the service stayed up and logged no error`, async () => {
    const slowest = healthz.slowest[0]?.ms ?? Infinity;
    console.log(`/healthz: ${healthz.polls} polls, the slowest ${slowest.toFixed(1)} ms (bound ${HEALTHZ_BOUND_MS} ms); the five slowest:`);
    for (const poll of healthz.slowest) console.log(`  ${poll.ms.toFixed(1)} ms while sending ${poll.during}`);
    expect(healthz.polls).toBeGreaterThan(routes.length * 5);
    expect(healthz.failures).toEqual([]);
    expect(slowest).toBeLessThan(HEALTHZ_BOUND_MS);
    expect((await server.fetch("/healthz")).status).toBe(200);
    expect(server.logLines().filter((line) => line.level === "error")).toEqual([]);
  });
});
