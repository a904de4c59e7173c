/**
 * Cross-app isolation on every route, as one shared suite. Apps A and B each have users,
 * connections, grants and usage. A route table names every route the app registers with
 * the attack app B (its key, its session tokens, its registered origin) can make on app A's
 * resources; one loop runs the same checks after each attack:
 * - no 5xx;
 * - no response to B contains anything of A's: app id, key, session token, grant token or
 *   id, usage request and generation ids, A's distinctive cap (nor the upstream key);
 * - A's state as A sees it (connection, usage rows, grant, live budget, what reached the
 *   upstream) is unchanged.
 * A completeness check makes a route without an entry fail the suite.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { chatTestApp, UPSTREAM_KEY, type ChatTestApp } from "../helpers/chat-app";
import { TEST_JWT_SECRET } from "../helpers/test-app";
import { expectError, expectOk } from "../helpers/expect";
import { usdToNanoFloor } from "../../src/money";
import { ADMIN_TOKEN } from "../helpers/admin";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

const API = "/api/v1";
const MODEL = "openai/gpt-4o-mini";
const ORIGIN_A = "http://localhost:3000"; // chatTestApp registers it for app A
const ORIGIN_B = "http://b.example";
/** A's users' cap: distinctive, so it cannot appear in B's responses by chance. */
const CAP_A = 4.321;

let t: ChatTestApp;

interface Actor {
  appId: string;
  key: string;
  /** A session token of the app's user "alice" (the same user id in both apps). */
  aliceToken: string;
  grantToken: string;
  grantId: string;
}
let A: Actor;
let B: Actor;
/** Strings of A's that B must never see. */
const secretsOfA: string[] = [];

function call(path: string, init: { method?: string; bearer?: string; headers?: Record<string, string>; json?: unknown } = {}): Promise<Response> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.bearer) headers.authorization = `Bearer ${init.bearer}`;
  let body: string | undefined;
  if (init.json !== undefined) {
    body = JSON.stringify(init.json);
    headers["content-type"] = "application/json";
  }
  return t.app.handle(new Request(`http://localhost${path}`, { method: init.method ?? (body ? "POST" : "GET"), headers, body }));
}

async function sessionFor(key: string, appUserId: string): Promise<string> {
  return ((await expectOk(await call(`${API}/sessions`, { bearer: key, json: { appUserId, requestLimit: { monthlyUsd: 10 } } }))) as { token: string }).token;
}

async function grantOf(appId: string, origin: string): Promise<{ grantToken: string; grantId: string }> {
  const consentToken = await t.deps.store.grants.createConsentRequest(
    { appId, usdCapNano: usdToNanoFloor(2), maxUses: null, ttlSeconds: 3600, origin, state: "" },
    t.clock.now(),
    600_000,
  );
  return expectOk(await call(`${API}/grants/consent`, { json: { consentToken } }));
}

/** App A's resources as A itself reads them. */
async function snapshotOfA(): Promise<unknown> {
  const status = await expectOk(await call(`${API}/status?appUserId=alice`, { bearer: A.key }));
  const connection = await expectOk(await call(`${API}/connections`, { bearer: A.aliceToken }));
  const usage = await expectOk(await call(`${API}/usage?appUserId=alice`, { bearer: A.key }));
  const grant = await expectOk(await call(`${API}/grants/current`, { bearer: A.key, headers: { "x-service-grant": A.grantToken } }));
  return { status, connection, usage, grant, upstreamCalls: t.mock.served.length };
}

// ---- the route table -------------------------------------------------------------------

interface RouteEntry {
  method: string;
  path: string;
  credential: "secretKey" | "session" | "admin" | "none";
  /** What B tries against A's resources; asserts the route's own answer; returns B's responses. */
  attack(): Promise<Response[]>;
}

const ROUTES: RouteEntry[] = [
  {
    method: "POST",
    path: `${API}/sessions`,
    credential: "secretKey",
    async attack() {
      // B mints a token for A's user id: it is a token of B's namespace.
      const res = await call(`${API}/sessions`, { bearer: B.key, json: { appUserId: "alice", requestLimit: { monthlyUsd: 10 } } });
      const { token } = (await expectOk(copy(res))) as { token: string };
      const claims = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()) as { app_id: string };
      expect(claims.app_id).toBe(B.appId);
      const seen = await call(`${API}/connections`, { bearer: token });
      expect(await expectOk(copy(seen))).toMatchObject({ connected: false });
      return [res, seen];
    },
  },
  {
    method: "GET",
    path: `${API}/connections`,
    credential: "session",
    async attack() {
      const res = await call(`${API}/connections`, { bearer: B.aliceToken });
      expect(await expectOk(copy(res))).toMatchObject({ appUserId: "alice", connected: false, limits: { monthlyUsd: 0 } });
      // B's page cannot read A's connection either: a token of A sent from B's origin gets
      // no CORS grant, so the browser withholds the answer from B's script.
      const fromB = await call(`${API}/connections`, { bearer: A.aliceToken, headers: { origin: ORIGIN_B } });
      expect(fromB.status).toBe(200);
      expect(fromB.headers.get("access-control-allow-origin")).toBeNull();
      return [res];
    },
  },
  {
    method: "POST",
    path: `${API}/connections`,
    credential: "session",
    async attack() {
      const res = await call(`${API}/connections`, { bearer: B.aliceToken, json: { monthlyUsd: 1 } });
      expect(await expectOk(copy(res))).toMatchObject({ appUserId: "alice", connected: true, limits: { monthlyUsd: 1 } });
      return [res];
    },
  },
  {
    method: "DELETE",
    path: `${API}/connections`,
    credential: "session",
    async attack() {
      const res = await call(`${API}/connections`, { method: "DELETE", bearer: B.aliceToken });
      expect(res.status).toBe(204);
      return [res];
    },
  },
  {
    method: "GET",
    path: `${API}/status`,
    credential: "secretKey",
    async attack() {
      const res = await call(`${API}/status?appUserId=alice`, { bearer: B.key });
      expect(await expectOk(copy(res))).toMatchObject({ connected: false, limits: { monthlyUsd: 0 }, usage: { monthlyUsd: 0 } });
      return [res];
    },
  },
  {
    method: "GET",
    path: `${API}/usage`,
    credential: "secretKey",
    async attack() {
      const res = await call(`${API}/usage?appUserId=alice`, { bearer: B.key });
      expect(await expectOk(copy(res))).toMatchObject({ data: [] });
      // A cursor pointing into A's rows only pages through B's own (none).
      const aRows = (
        (await expectOk(await call(`${API}/usage?appUserId=alice`, { bearer: A.key }))) as { data: Array<{ requestId: string; startedAt: string }> }
      ).data;
      expect(aRows.length).toBeGreaterThan(0);
      const cursor = Buffer.from(`${Date.parse(aRows[0]!.startedAt) + 1}:${aRows[0]!.requestId}`).toString("base64url");
      const paged = await call(`${API}/usage?appUserId=alice&cursor=${cursor}`, { bearer: B.key });
      expect(await expectOk(copy(paged))).toMatchObject({ data: [] });
      return [res, paged];
    },
  },
  {
    method: "GET",
    path: `${API}/models`,
    credential: "secretKey",
    async attack() {
      // The upstream's catalogue, the same for every app: nothing of A's is in it.
      const res = await call(`${API}/models`, { bearer: B.key });
      expect(((await expectOk(copy(res))) as { data: unknown[] }).data.length).toBeGreaterThan(0);
      return [res];
    },
  },
  ...[`${API}/models/:author/:slug`, `${API}/models/:author`].map((path): RouteEntry => ({
    method: "GET",
    path,
    credential: "secretKey",
    async attack() {
      // One model of the same catalogue, by id (as two segments, or one with its / encoded).
      const id = path.endsWith(":slug") ? MODEL : encodeURIComponent(MODEL);
      const res = await call(`${API}/models/${id}`, { bearer: B.key });
      expect(((await expectOk(copy(res))) as { id: string }).id).toBe(MODEL);
      return [res];
    },
  })),
  {
    method: "POST",
    path: `${API}/chat/completions`,
    credential: "secretKey",
    async attack() {
      const body = { model: MODEL, messages: [{ role: "user", content: "spend A's money" }], max_tokens: 5 };
      const asUser = await call(`${API}/chat/completions`, { bearer: B.key, headers: { "x-service-user": "alice" }, json: body });
      await expectError(copy(asUser), 402, "not_connected");
      const withGrant = await call(`${API}/chat/completions`, { bearer: B.key, headers: { "x-service-grant": A.grantToken }, json: body });
      await expectError(copy(withGrant), 402, "grant_invalid");
      return [asUser, withGrant];
    },
  },
  {
    method: "GET",
    path: `${API}/grants/current`,
    credential: "secretKey",
    async attack() {
      const res = await call(`${API}/grants/current`, { bearer: B.key, headers: { "x-service-grant": A.grantToken } });
      await expectError(copy(res), 402, "grant_invalid");
      return [res];
    },
  },
  {
    method: "DELETE",
    path: `${API}/grants/current`,
    credential: "secretKey",
    async attack() {
      const res = await call(`${API}/grants/current`, { method: "DELETE", bearer: B.key, headers: { "x-service-grant": A.grantToken } });
      await expectError(copy(res), 402, "grant_invalid");
      return [res];
    },
  },
  {
    method: "GET",
    path: `${API}/grants/consent`,
    credential: "none",
    async attack() {
      // B's page asks for a grant on A's app: B's origin is not one of A's.
      const res = await call(`${API}/grants/consent?appId=${A.appId}&usd=1&origin=${encodeURIComponent(ORIGIN_B)}`);
      expect(res.status).toBe(400);
      expect(await res.clone().text()).toContain("registered origins");
      // The page names the app B asked about (B knows that id); nothing else of A's may show.
      return [withoutText(res, A.appId)];
    },
  },
  {
    method: "POST",
    path: `${API}/connections/funding`,
    credential: "session",
    async attack() {
      // B's token starts nothing for A's user: its app is B's, whose users may not pay themselves.
      const res = await call(`${API}/connections/funding`, { bearer: B.aliceToken, json: { monthlyUsd: 1 } });
      expect(res.status).toBe(400);
      expect(res.headers.get("set-cookie")).toBeNull();
      return [res];
    },
  },
  {
    method: "GET",
    path: `${API}/connect/funding/callback`,
    credential: "none",
    async attack() {
      // A flow A's user started, completed by B's browser (its own session's cookie): refused, and spent.
      const state = await t.deps.store.fundingFlows.create(
        { appId: A.appId, appUserId: "alice", sessionId: "a-session-of-alice", codeVerifier: "v".repeat(43), monthlyCapNano: usdToNanoFloor(9) },
        t.clock.now(),
        600_000,
      );
      const bSession = (JSON.parse(Buffer.from(B.aliceToken.split(".")[1]!, "base64url").toString()) as { jti: string }).jti;
      const res = await call(`${API}/connect/funding/callback?state=${state}&code=stolen`, { headers: { cookie: `mp_funding_session=${bSession}` } });
      expect(res.status).toBe(400);
      expect(await t.deps.store.fundingFlows.take(state, "a-session-of-alice", t.clock.now())).toBeNull();
      return [res];
    },
  },
  {
    method: "GET",
    path: `${API}/connect`,
    credential: "none",
    async attack() {
      // B's page opens the connect page for A's app: B's origin is not one of A's.
      const res = await call(`${API}/connect?appId=${A.appId}&origin=${encodeURIComponent(ORIGIN_B)}`);
      expect(res.status).toBe(400);
      expect(await res.clone().text()).toContain("registered origins");
      return [withoutText(res, A.appId)];
    },
  },
  {
    method: "POST",
    path: `${API}/grants/consent`,
    credential: "none",
    async attack() {
      // A consent token of A's, posted by a page on another site: refused, and still unused.
      const consentToken = await t.deps.store.grants.createConsentRequest(
        { appId: A.appId, usdCapNano: usdToNanoFloor(1), maxUses: null, ttlSeconds: 3600, origin: ORIGIN_A, state: "" },
        t.clock.now(),
        600_000,
      );
      const res = await call(`${API}/grants/consent`, { json: { consentToken }, headers: { "sec-fetch-site": "cross-site", origin: ORIGIN_B } });
      await expectError(copy(res), 400, "invalid_request");
      expect((await t.deps.store.grants.approveConsent(consentToken, t.clock.now())).kind).toBe("approved"); // was not consumed
      return [res];
    },
  },
  ...["/", "/healthz", `${API}/openapi.json`, "/docs", "/docs/swagger-ui.js", "/docs/swagger-ui.css", "/docs/start.js", `${API}/grants/popup.js`].map(
    (path): RouteEntry => ({
      method: "GET",
      path,
      credential: "none",
      async attack() {
        const res = await call(path, { bearer: B.key, headers: { origin: ORIGIN_B } });
        expect(res.status).toBe(200);
        return [res];
      },
    }),
  ),
  {
    method: "GET",
    path: `${API}/docs`,
    credential: "none",
    async attack() {
      // Only a redirect to the reference page, the same for everyone.
      const res = await call(`${API}/docs`, { bearer: B.key, headers: { origin: ORIGIN_B } });
      expect({ status: res.status, location: res.headers.get("location") }).toEqual({ status: 301, location: "/docs" });
      return [res];
    },
  },
  {
    method: "GET",
    path: "/metrics",
    credential: "none",
    async attack() {
      // Off without METRICS_TOKEN (it would show every app's spend), and never open to an app's key.
      const res = await call("/metrics", { bearer: B.key, headers: { origin: ORIGIN_B } });
      expect(res.status).toBe(404);
      return [res];
    },
  },
  {
    method: "GET",
    path: "/readyz",
    credential: "none",
    async attack() {
      // Ready or not (this app's price list is not loaded), it says the same to anyone.
      const res = await call("/readyz", { bearer: B.key, headers: { origin: ORIGIN_B } });
      expect([200, 503]).toContain(res.status);
      return [res];
    },
  },
  {
    method: "OPTIONS",
    path: `${API}/connections`,
    credential: "none",
    async attack() {
      const res = await call(`${API}/connections`, { method: "OPTIONS", headers: { origin: ORIGIN_B, "access-control-request-method": "DELETE" } });
      expect(res.status).toBe(204);
      return [res];
    },
  },
];

/** The operator's routes (ADMIN_TOKEN is set here), as registered. */
const ADMIN_ROUTES: Array<[string, string]> = [
  ["POST", "/apps"],
  ["GET", "/apps"],
  ["GET", "/apps/:appId"],
  ["PATCH", "/apps/:appId"],
  ["POST", "/apps/:appId/disable"],
  ["POST", "/apps/:appId/enable"],
  ["GET", "/apps/:appId/keys"],
  ["POST", "/apps/:appId/keys"],
  ["DELETE", "/apps/:appId/keys/:keyId"],
  ["GET", "/apps/:appId/connections"],
  ["GET", "/apps/:appId/connections/:appUserId"],
  ["DELETE", "/apps/:appId/connections/:appUserId"],
  ["GET", "/apps/:appId/grants"],
  ["DELETE", "/apps/:appId/grants/:grantId"],
  ["GET", "/apps/:appId/usage"],
  ["POST", "/apps/:appId/webhooks"],
  ["GET", "/apps/:appId/webhooks"],
  ["GET", "/apps/:appId/webhooks/deliveries"],
  ["DELETE", "/apps/:appId/webhooks/:endpointId"],
  ["POST", "/apps/:appId/webhooks/:endpointId/disable"],
  ["POST", "/apps/:appId/webhooks/:endpointId/enable"],
];

ROUTES.push(
  ...ADMIN_ROUTES.map(([method, path]): RouteEntry => ({
    method,
    path: `${API}/admin${path}`,
    credential: "admin",
    async attack() {
      // The operator's routes take ADMIN_TOKEN only: none of B's credentials reaches A's app through them.
      const keyOfA = (await t.deps.store.apps.keysOf(A.appId))[0]!.id;
      const query = path.endsWith("/usage") ? "?from=2026-01-01&to=2026-01-31" : "";
      const concrete = `${API}/admin${path.replace(":appId", A.appId).replace(":keyId", keyOfA).replace(":appUserId", "alice").replace(":grantId", A.grantId).replace(":endpointId", "whenope")}${query}`;
      const json =
        method === "POST" && path === "/apps"
          ? { name: "B's app" }
          : method === "POST" && path.endsWith("/webhooks")
            ? { url: "https://b.example/hooks" }
            : method === "PATCH"
              ? { name: "renamed by B" }
              : undefined;
      const responses: Response[] = [];
      for (const bearer of [B.key, B.aliceToken, B.grantToken]) {
        const res = await call(concrete, { method, bearer, json, headers: { origin: ORIGIN_B } });
        await expectError(copy(res), 401, "auth");
        responses.push(res);
      }
      return responses;
    },
  })),
);

/** A second readable copy of a response (typed as Bun's Response, which `clone` is not). */
const copy = (res: Response): Response => res.clone() as unknown as Response;

/** A copy of `res` whose text has `known` removed, for a value B itself sent. */
function withoutText(res: Response, known: string): Response {
  const promised = res
    .clone()
    .text()
    .then((text) => text.replaceAll(known, "<known>"));
  return { status: res.status, headers: res.headers, clone: () => withoutText(res, known), text: () => promised } as unknown as Response;
}

// ---- setup -----------------------------------------------------------------------------

beforeAll(async () => {
  t = await chatTestApp({
    env: { JWT_SECRET: TEST_JWT_SECRET, RL_CHAT_LIMIT: "100000", RL_SESSIONS_LIMIT: "100000", ADMIN_TOKEN, RL_ADMIN_AUTH_LIMIT: "100000" },
  });
  const b = await createAppWithKey(t.deps.store.apps, "B", [ORIGIN_B], t.clock.now());
  await t.connect("alice", CAP_A);
  const grantA = await grantOf(t.appId, ORIGIN_A);
  A = { appId: t.appId, key: t.secretKey, aliceToken: await sessionFor(t.secretKey, "alice"), ...grantA };
  const grantB = await grantOf(b.app.id, ORIGIN_B);
  B = { appId: b.app.id, key: b.key.secretKey, aliceToken: await sessionFor(b.key.secretKey, "alice"), ...grantB };
  await t.deps.store.connections.approve(B.appId, "bob", usdToNanoFloor(7), t.clock.now());

  // Usage on both sides: A's user and A's grant; B's user and B's grant.
  const chat = (key: string, headers: Record<string, string>) =>
    call(`${API}/chat/completions`, { bearer: key, headers, json: { model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 5 } });
  const aResponses = [await chat(A.key, { "x-service-user": "alice" }), await chat(A.key, { "x-service-grant": A.grantToken })];
  await expectOk(await chat(B.key, { "x-service-user": "bob" }));
  await expectOk(await chat(B.key, { "x-service-grant": B.grantToken }));
  await t.flush();

  secretsOfA.push(A.appId, A.key, A.key.slice(`sk_live_${A.appId}_`.length), A.aliceToken, A.grantToken, A.grantId, String(CAP_A));
  // Not A's, but the operator's: no client may ever see it.
  secretsOfA.push(UPSTREAM_KEY);
  for (const res of aResponses) {
    const body = (await expectOk(res)) as { id: string };
    secretsOfA.push(res.headers.get("x-request-id")!, body.id);
  }
  const usage = (await expectOk(await call(`${API}/usage?appUserId=alice`, { bearer: A.key }))) as { data: Array<{ requestId: string }> };
  expect(usage.data.length).toBe(1);
});

// ---- the suite -------------------------------------------------------------------------

describe("cross-app isolation", () => {
  test("the route table lists exactly the routes the app registers", () => {
    const registered = t.app.routes.map((r) => `${r.method} ${r.path}`).sort();
    const listed = ROUTES.map((r) => `${r.method} ${r.path}`).sort();
    expect(listed).toEqual(registered);
    expect(new Set(listed).size).toBe(listed.length);
  });

  test("every documented operation is in the table", async () => {
    const spec = (await expectOk(await call(`${API}/openapi.json`))) as { paths: Record<string, Record<string, unknown>> };
    const listed = new Set(ROUTES.map((r) => `${r.method} ${r.path}`));
    // openapi.json writes path parameters `{appId}`; the router, `:appId`.
    const documented = Object.entries(spec.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ":$1")}`),
    );
    expect(documented.length).toBeGreaterThan(10);
    expect(documented.filter((op) => !listed.has(op))).toEqual([]);
  });

  test("the leak check can fail: A's own answers contain A's data", async () => {
    const own = await (await call(`${API}/grants/current`, { bearer: A.key, headers: { "x-service-grant": A.grantToken } })).text();
    expect(secretsOfA.filter((s) => own.includes(s))).toContain(A.grantId);
  });

  for (const route of ROUTES) {
    test(`${route.method} ${route.path} (${route.credential}): B cannot read, change or spend A's resources`, async () => {
      const before = await snapshotOfA();
      const responses = await route.attack();
      expect(responses.length).toBeGreaterThan(0);
      for (const res of responses) {
        expect(res.status).toBeLessThan(500);
        const seen = `${[...res.headers].map(([k, v]) => `${k}: ${v}`).join("\n")}\n${await res.text()}`;
        expect(secretsOfA.filter((s) => seen.includes(s))).toEqual([]);
      }
      expect(await snapshotOfA()).toEqual(before);
    });
  }

  test("B's own resources were reachable all along: the attacks were refused for being A's", async () => {
    expect(await expectOk(await call(`${API}/status?appUserId=bob`, { bearer: B.key }))).toMatchObject({ connected: true, limits: { monthlyUsd: 7 } });
    expect(await expectOk(await call(`${API}/grants/current`, { bearer: B.key, headers: { "x-service-grant": B.grantToken } }))).toMatchObject({
      grantId: B.grantId,
      status: "active",
    });
    expect(((await expectOk(await call(`${API}/usage?appUserId=bob`, { bearer: B.key }))) as { data: unknown[] }).data.length).toBe(1);
  });
});
