/**
 * An app disabled over the admin API: its genuine key and session tokens are refused on
 * every route that takes them with one answer, 401 `auth` "this app is disabled", so its
 * developer looks at the app and not at the key. Credentials that do not verify keep their
 * usual answer, so the message tells nobody without a genuine credential that the app
 * exists or is disabled. Enabling the app makes the same key and tokens work again.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { SignJWT } from "jose";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";
import { ADMIN_TOKEN } from "../helpers/admin";
import { approveConsentOrThrow } from "../helpers/grants";
import { TEST_JWT_SECRET } from "../helpers/test-app";
import { usdToNanoFloor } from "../../src/money";
import { issueKey } from "../../src/services/operator/secret-keys";

const API = "/api/v1";
const DISABLED = '{"error":{"code":"auth","message":"this app is disabled"}}';
const INVALID_KEY = '{"error":{"code":"auth","message":"invalid secret key"}}';
const INVALID_TOKEN = '{"error":{"code":"auth","message":"invalid session token"}}';

interface Endpoint {
  method: string;
  path: string;
  kind: "secretKey" | "session";
  headers?: Record<string, string>;
  json?: unknown;
}

let t: ChatTestApp;
let token: string;
let grantToken: string;
let revokedKey: string;

/** Every route an app's key or session token opens; the grant routes with a live grant. */
const endpoints = (): Endpoint[] => [
  { method: "POST", path: `${API}/sessions`, kind: "secretKey", json: { appUserId: "ann" } },
  { method: "GET", path: `${API}/status?appUserId=ann`, kind: "secretKey" },
  { method: "GET", path: `${API}/usage?appUserId=ann`, kind: "secretKey" },
  { method: "GET", path: `${API}/models`, kind: "secretKey" },
  {
    method: "POST",
    path: `${API}/chat/completions`,
    kind: "secretKey",
    headers: { "x-service-user": "ann" },
    json: { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 5 },
  },
  { method: "GET", path: `${API}/grants/current`, kind: "secretKey", headers: { "x-service-grant": grantToken } },
  { method: "DELETE", path: `${API}/grants/current`, kind: "secretKey", headers: { "x-service-grant": grantToken } },
  { method: "GET", path: `${API}/connections`, kind: "session" },
  { method: "POST", path: `${API}/connections`, kind: "session", json: { monthlyUsd: 1 } },
  { method: "DELETE", path: `${API}/connections`, kind: "session" },
];

function send(endpoint: Endpoint, credential: string): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${credential}`, origin: "http://localhost:3000", ...endpoint.headers };
  if (endpoint.json !== undefined) headers["content-type"] = "application/json";
  const body = endpoint.json === undefined ? undefined : JSON.stringify(endpoint.json);
  return t.app.handle(new Request(`http://localhost${endpoint.path}`, { method: endpoint.method, headers, body }));
}

const admin = (path: string) =>
  t.app.handle(new Request(`http://localhost${API}/admin/apps/${t.appId}${path}`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }));

beforeAll(async () => {
  t = await chatTestApp({ env: { ADMIN_TOKEN, JWT_SECRET: TEST_JWT_SECRET, RL_CHAT_LIMIT: "100000", RL_SESSIONS_LIMIT: "100000" } });
  await t.connect("ann", 5);
  const minted = await send({ method: "POST", path: `${API}/sessions`, kind: "secretKey", json: { appUserId: "ann" } }, t.secretKey);
  token = ((await minted.json()) as { token: string }).token;
  const now = t.clock.now();
  const consent = await t.deps.store.grants.createConsentRequest(
    { appId: t.appId, usdCapNano: usdToNanoFloor(1), maxUses: null, ttlSeconds: 3600, origin: "http://localhost:3000", state: "s" },
    now,
    600_000,
  );
  grantToken = (await approveConsentOrThrow(t.deps.store.grants, consent, now)).grantToken;
  const revoked = await issueKey(t.deps.store.apps, t.appId, now);
  await t.deps.store.apps.revokeKey(t.appId, revoked.keyId, now);
  revokedKey = revoked.secretKey;
});

describe("a disabled app's credentials", () => {
  test("controls: before the disable, the key and the token open every route but the deletions", async () => {
    for (const endpoint of endpoints().filter((e) => e.method !== "DELETE")) {
      const res = await send(endpoint, endpoint.kind === "secretKey" ? t.secretKey : token);
      expect({ route: `${endpoint.method} ${endpoint.path}`, status: res.status }).toEqual({ route: `${endpoint.method} ${endpoint.path}`, status: 200 });
    }
  });

  test('disabled over the admin API, its genuine key and token get 401 "this app is disabled" on every route', async () => {
    expect((await admin("/disable")).status).toBe(200);
    for (const endpoint of endpoints()) {
      const res = await send(endpoint, endpoint.kind === "secretKey" ? t.secretKey : token);
      const route = `${endpoint.method} ${endpoint.path}`;
      expect({ route, status: res.status, body: await res.text() }).toEqual({ route, status: 401, body: DISABLED });
    }
  });

  test("credentials that do not verify keep their answer: no oracle of which apps are disabled", async () => {
    const secret = t.secretKey.slice(`sk_live_${t.appId}_`.length);
    const wrongSecret = secret.slice(0, -1) + (secret.endsWith("A") ? "B" : "A");
    const forged = await new SignJWT({ app_id: t.appId })
      .setProtectedHeader({ alg: "HS256", typ: "session+jwt" })
      .setIssuer("metered-proxy")
      .setAudience("metered-proxy:connections")
      .setSubject("ann")
      .setIssuedAt(Math.floor(t.clock.now() / 1000))
      .setExpirationTime(Math.floor(t.clock.now() / 1000) + 60)
      .setJti("forged")
      .sign(new TextEncoder().encode("another-secret-that-is-long-enough-0123456789"));
    const cases: Array<[string, string, Endpoint]> = [
      [`sk_live_${t.appId}_${wrongSecret}`, INVALID_KEY, endpoints()[1]!],
      [revokedKey, INVALID_KEY, endpoints()[1]!],
      [forged, INVALID_TOKEN, endpoints()[7]!],
    ];
    for (const [credential, expected, endpoint] of cases) {
      const res = await send(endpoint, credential);
      expect({ status: res.status, body: await res.text() }).toEqual({ status: 401, body: expected });
    }
  });

  test("enabled again, the same key and the same token work, and nothing was done meanwhile", async () => {
    expect((await admin("/enable")).status).toBe(200);
    const status = (await (await send(endpoints()[1]!, t.secretKey)).json()) as { connected: boolean; limits: { monthlyUsd: number } };
    // The cap the control approved: the deletions and approval while disabled did nothing.
    expect(status).toMatchObject({ connected: true, limits: { monthlyUsd: 1 } });
    const grant = (await (await send(endpoints()[5]!, t.secretKey)).json()) as { status: string };
    expect(grant.status).toBe("active");
    expect((await send(endpoints()[7]!, token)).status).toBe(200);
  });
});
