/**
 * Auth matrix: every tampered or foreign credential against every endpoint that takes that
 * kind of credential (secret key, session token, the operator's admin token), through one
 * app with a memory logger at debug level. Each one is 401 with the same envelope; then
 * every log line is scanned for every key, secret part, token and JWT segment the run used.
 *
 * Messages: every failure of a presented credential of the right kind says the same thing
 * ("invalid secret key" / "invalid session token"), so a caller cannot learn which check
 * failed (unknown app vs wrong secret vs revoked key; bad signature vs wrong audience). Only
 * four messages differ, and none of them tells an attacker anything new: no or a malformed
 * Authorization header (nothing was presented), the wrong kind of credential (visible from
 * its format), "session token expired", which jose raises only after the signature
 * verified (so only for genuine tokens, whose `exp` their holder can read anyway) and which
 * tells browser code to mint a new token, and "this app is disabled", only for a key that
 * matched or a token that verified (a wrong secret for a disabled app's id is "invalid
 * secret key" as any other).
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { SignJWT, base64url, generateKeyPair } from "jose";
import { chatTestApp, UPSTREAM_KEY, type ChatTestApp } from "../helpers/chat-app";
import { TEST_JWT_SECRET } from "../helpers/test-app";
import { expectError, expectOk } from "../helpers/expect";
import { usdToNanoFloor } from "../../src/money";
import { ADMIN_TOKEN } from "../helpers/admin";
import { approveConsentOrThrow } from "../helpers/grants";
import { createAppWithKey, issueKey } from "../../src/services/operator/secret-keys";

const API = "/api/v1";
const MODEL = "openai/gpt-4o-mini";
const INVALID_KEY = '{"error":{"code":"auth","message":"invalid secret key"}}';
const INVALID_TOKEN = '{"error":{"code":"auth","message":"invalid session token"}}';
const APP_DISABLED = '{"error":{"code":"auth","message":"this app is disabled"}}';
const INVALID_ADMIN = '{"error":{"code":"auth","message":"invalid admin token"}}';
const MISSING = '{"error":{"code":"auth","message":"missing Authorization header"}}';
const NOT_BEARER = `{"error":{"code":"auth","message":"Authorization header must be 'Bearer <credential>'"}}`;

let t: ChatTestApp;
/** Every credential, key, secret and token the run handed out or presented. */
const secrets = new Set<string>([TEST_JWT_SECRET, UPSTREAM_KEY, ADMIN_TOKEN]);
const remember = <T extends string>(s: T): T => {
  if (s.length >= 8) secrets.add(s);
  return s;
};

interface Ids {
  appA: string;
  keyA: string;
  keyB: string;
  appB: string;
  grantA: string;
  /** A second grant of app A, for the control of DELETE /grants/current. */
  grantSpare: string;
  /** A genuine session token of app A's user "victim". */
  tokenA: string;
  /** The id of app A's first key, which minted tokenA. */
  keyIdA: string;
  /** The app the admin endpoints act on (they disable it, revoke its key, user and grant). */
  appC: string;
}
let ids: Ids;
let nowS: number;
/** The grant the grant endpoints are called with. */
let currentGrant = "";
/** App A's key that is valid at the end (the rotation test replaces the first one). */
let liveKeyA = "";

// ---- endpoints -------------------------------------------------------------------------

interface Endpoint {
  method: string;
  path: string;
  kind: "secretKey" | "session" | "admin";
  headers?: () => Record<string, string>;
  json?: unknown;
  /** The status the endpoint answers with a valid credential (the control). */
  okStatus: number;
}

const SECRET_KEY_ENDPOINTS: Endpoint[] = [
  { method: "POST", path: `${API}/sessions`, kind: "secretKey", json: { appUserId: "victim" }, okStatus: 200 },
  { method: "GET", path: `${API}/status?appUserId=victim`, kind: "secretKey", okStatus: 200 },
  { method: "GET", path: `${API}/usage?appUserId=victim`, kind: "secretKey", okStatus: 200 },
  {
    method: "POST",
    path: `${API}/chat/completions`,
    kind: "secretKey",
    headers: () => ({ "x-service-user": "victim" }),
    json: { model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 5 },
    okStatus: 200,
  },
  { method: "GET", path: `${API}/grants/current`, kind: "secretKey", headers: () => ({ "x-service-grant": currentGrant }), okStatus: 200 },
  { method: "DELETE", path: `${API}/grants/current`, kind: "secretKey", headers: () => ({ "x-service-grant": currentGrant }), okStatus: 204 },
];

const SESSION_ENDPOINTS: Endpoint[] = [
  { method: "GET", path: `${API}/connections`, kind: "session", okStatus: 200 },
  { method: "POST", path: `${API}/connections`, kind: "session", json: { monthlyUsd: 1 }, okStatus: 200 },
  { method: "DELETE", path: `${API}/connections`, kind: "session", okStatus: 204 },
];

/** Every admin operation, on app C; filled in once app C exists. */
const ADMIN_ENDPOINTS: Endpoint[] = [];

function adminEndpoints(appC: string, keyC: string, grantC: string, hookC: string): Endpoint[] {
  const admin = (method: string, path: string, okStatus = 200, json?: unknown): Endpoint => ({
    method,
    path: `${API}/admin${path}`,
    kind: "admin",
    okStatus,
    json,
  });
  return [
    admin("GET", "/apps"),
    admin("POST", "/apps", 201, { name: "made by the matrix control" }),
    admin("GET", `/apps/${appC}`),
    admin("PATCH", `/apps/${appC}`, 200, { name: "C renamed" }),
    admin("POST", `/apps/${appC}/disable`),
    admin("POST", `/apps/${appC}/enable`),
    admin("GET", `/apps/${appC}/keys`),
    admin("POST", `/apps/${appC}/keys`, 201),
    admin("DELETE", `/apps/${appC}/keys/${keyC}`),
    admin("GET", `/apps/${appC}/connections`),
    admin("GET", `/apps/${appC}/connections/victim`),
    admin("DELETE", `/apps/${appC}/connections/victim`),
    admin("GET", `/apps/${appC}/grants`),
    admin("DELETE", `/apps/${appC}/grants/${grantC}`),
    admin("GET", `/apps/${appC}/usage?from=2026-01-01&to=2026-01-31`),
    admin("POST", `/apps/${appC}/webhooks`, 201, { url: "https://c.example/more-hooks" }),
    admin("GET", `/apps/${appC}/webhooks`),
    admin("GET", `/apps/${appC}/webhooks/deliveries`),
    admin("POST", `/apps/${appC}/webhooks/${hookC}/disable`),
    admin("POST", `/apps/${appC}/webhooks/${hookC}/enable`),
    admin("DELETE", `/apps/${appC}/webhooks/${hookC}`),
  ];
}

/** Sends `endpoint` with exactly this Authorization header (null: none). */
function send(endpoint: Endpoint, authorization: string | null): Promise<Response> {
  const headers: Record<string, string> = { ...endpoint.headers?.() };
  if (authorization !== null) headers.authorization = authorization;
  let body: string | undefined;
  if (endpoint.json !== undefined) {
    body = JSON.stringify(endpoint.json);
    headers["content-type"] = "application/json";
  }
  return t.app.handle(new Request(`http://localhost${endpoint.path}`, { method: endpoint.method, headers, body }));
}

/** 401 `auth`, exactly `{error: {code, message}}`, and nothing of the credential echoed. */
async function expect401(res: Response, credential: string | null): Promise<string> {
  const clone = res.clone();
  await expectError(res, 401, "auth");
  const text = await clone.text();
  expect(Object.keys(JSON.parse(text).error).sort()).toEqual(["code", "message"]);
  // The value after the scheme word, and each of its parts (key segments, JWT segments).
  const value = credential?.replace(/^(Bearer|Basic) /i, "") ?? "";
  for (const part of [value, ...value.split(/[._ ]/)]) if (part.length >= 8) expect(text).not.toContain(part);
  return text;
}

// ---- forging ---------------------------------------------------------------------------

const encode = (s: string) => new TextEncoder().encode(s);

function claimsFor(appId: string): Record<string, unknown> {
  return {
    app_id: appId,
    key_id: ids.keyIdA,
    iss: "metered-proxy",
    aud: "metered-proxy:connections",
    sub: "victim",
    iat: nowS,
    exp: nowS + 600,
    jti: crypto.randomUUID(),
  };
}

async function forge(
  opts: { app?: string; header?: Record<string, unknown>; claims?: Record<string, unknown>; omit?: string[]; key?: Uint8Array | CryptoKey } = {},
): Promise<string> {
  const payload = { ...claimsFor(opts.app ?? ids.appA), ...opts.claims };
  for (const claim of opts.omit ?? []) delete payload[claim];
  const header = { alg: "HS256", typ: "session+jwt", ...opts.header };
  return new SignJWT(payload).setProtectedHeader(header as { alg: string }).sign(opts.key ?? encode(TEST_JWT_SECRET));
}

function unsigned(header: Record<string, unknown>, payload: Record<string, unknown>, signature = ""): string {
  const part = (v: unknown) => base64url.encode(JSON.stringify(v));
  return `${part(header)}.${part(payload)}.${signature}`;
}

/** A genuine token's payload edited, the original signature kept. */
function editPayload(token: string, edit: (claims: Record<string, unknown>) => void): string {
  const [header, payload, signature] = token.split(".") as [string, string, string];
  const claims = JSON.parse(new TextDecoder().decode(base64url.decode(payload))) as Record<string, unknown>;
  edit(claims);
  return `${header}.${base64url.encode(JSON.stringify(claims))}.${signature}`;
}

/** A grant of app A, approved through the consent endpoint (so its tokens pass through the app). */
async function grantOfA(now: number): Promise<string> {
  const consentToken = remember(
    await t.deps.store.grants.createConsentRequest(
      { appId: ids.appA, usdCapNano: usdToNanoFloor(1), maxUses: null, ttlSeconds: 3600, origin: "http://localhost:3000", state: "s" },
      now,
      600_000,
    ),
  );
  const approved = await t.app.handle(
    new Request(`http://localhost${API}/grants/consent`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ consentToken }),
    }),
  );
  return remember(((await expectOk(approved)) as { grantToken: string }).grantToken);
}

async function mint(key: string, appUserId: string): Promise<string> {
  const res = await t.app.handle(
    new Request(`http://localhost${API}/sessions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ appUserId, requestLimit: { monthlyUsd: 5 } }),
    }),
  );
  return remember(((await expectOk(res)) as { token: string }).token);
}

// ---- the matrix ------------------------------------------------------------------------

/** Variants of the Authorization header: [name, header, the exact body expected]. */
type Variant = [string, string | null, string];
let secretKeyVariants: Variant[];
let sessionVariants: Variant[];
let adminVariants: Variant[];
/** Apps in the store once the controls ran: no tampered admin call may add one. */
let appsAfterControls = 0;

beforeAll(async () => {
  t = await chatTestApp({
    env: { JWT_SECRET: TEST_JWT_SECRET, RL_CHAT_LIMIT: "100000", RL_SESSIONS_LIMIT: "100000", ADMIN_TOKEN, RL_ADMIN_AUTH_LIMIT: "100000" },
  });
  nowS = Math.floor(t.clock.now() / 1000);
  const now = t.clock.now();
  const b = await createAppWithKey(t.deps.store.apps, "B", ["http://localhost:3001"], now);
  const disabled = await createAppWithKey(t.deps.store.apps, "disabled", [], now);
  const c = await createAppWithKey(t.deps.store.apps, "C", ["http://localhost:3000"], now);
  remember(c.key.secretKey);
  await t.deps.store.connections.approve(c.app.id, "victim", usdToNanoFloor(1), now);
  const consentC = remember(
    await t.deps.store.grants.createConsentRequest(
      { appId: c.app.id, usdCapNano: usdToNanoFloor(1), maxUses: null, ttlSeconds: 3600, origin: "http://localhost:3000", state: "s" },
      now,
      600_000,
    ),
  );
  const grantC = await approveConsentOrThrow(t.deps.store.grants, consentC, now);
  remember(grantC.grantToken);
  const hookC = await t.deps.store.webhooks.createEndpoint(c.app.id, "https://c.example/hooks", null, now);
  ADMIN_ENDPOINTS.push(...adminEndpoints(c.app.id, c.key.keyId, grantC.grant.id, hookC.id));
  const keyIdA = (await t.deps.store.apps.activeKeysOf(t.appId))[0]!.id;
  ids = {
    appA: t.appId,
    keyA: remember(t.secretKey),
    appB: b.app.id,
    keyB: remember(b.key.secretKey),
    grantA: "",
    grantSpare: "",
    tokenA: "",
    keyIdA,
    appC: c.app.id,
  };
  await t.connect("victim", 5);
  ids.tokenA = await mint(ids.keyA, "victim");
  const tokenB = await mint(ids.keyB, "victim");
  const disabledToken = await mint(remember(disabled.key.secretKey), "victim");
  t.db.query("UPDATE apps SET disabled_at = ? WHERE id = ?").run(now, disabled.app.id);

  ids.grantA = await grantOfA(now);
  ids.grantSpare = await grantOfA(now);
  currentGrant = ids.grantA;

  // A revoked key, and the key that replaced it.
  const revoked = await issueKey(t.deps.store.apps, ids.appA, now);
  remember(revoked.secretKey);
  await t.deps.store.apps.revokeKey(ids.appA, revoked.keyId, now);

  const keyA = ids.keyA;
  const secretA = keyA.slice(`sk_live_${ids.appA}_`.length);
  const secretB = ids.keyB.slice(`sk_live_${ids.appB}_`.length);
  remember(secretA);
  remember(secretB);
  const other = keyA.endsWith("A") ? "B" : "A";
  secretKeyVariants = [
    ["no Authorization header", null, MISSING],
    ["an empty Authorization header", "", MISSING],
    ["Basic instead of Bearer", `Basic ${btoa(keyA)}`, NOT_BEARER],
    ["the key without a scheme", keyA, NOT_BEARER],
    ["Bearer with nothing after it", "Bearer ", NOT_BEARER],
    ["Bearer with two credentials", `Bearer ${keyA} ${keyA}`, NOT_BEARER],
    ["a truncated key", `Bearer ${keyA.slice(0, -1)}`, INVALID_KEY],
    ["the key with one character more", `Bearer ${keyA}A`, INVALID_KEY],
    ["the key with its last character changed", `Bearer ${keyA.slice(0, -1)}${other}`, INVALID_KEY],
    ["only the secret part", `Bearer ${secretA}`, INVALID_KEY],
    ["app B's id with app A's secret", `Bearer sk_live_${ids.appB}_${secretA}`, INVALID_KEY],
    ["app A's id with app B's secret", `Bearer sk_live_${ids.appA}_${secretB}`, INVALID_KEY],
    ["an app id that does not exist", `Bearer sk_live_appnosuchapp0001_${secretA}`, INVALID_KEY],
    ["a test-mode prefix", `Bearer ${keyA.replace("sk_live_", "sk_test_")}`, INVALID_KEY],
    ["a revoked key", `Bearer ${revoked.secretKey}`, INVALID_KEY],
    ["the key of a disabled app", `Bearer ${disabled.key.secretKey}`, APP_DISABLED],
    ["a disabled app's id with app A's secret", `Bearer sk_live_${disabled.app.id}_${secretA}`, INVALID_KEY],
    ["a grant token", `Bearer ${ids.grantA}`, INVALID_KEY],
    [
      "a valid session token of the same app",
      `Bearer ${ids.tokenA}`,
      '{"error":{"code":"auth","message":"invalid secret key: this endpoint takes a secret key, not a session token"}}',
    ],
    ["the admin token", `Bearer ${ADMIN_TOKEN}`, INVALID_KEY],
  ];
  const otherAdmin = ADMIN_TOKEN.endsWith("A") ? "B" : "A";
  adminVariants = [
    ["no Authorization header", null, MISSING],
    ["an empty Authorization header", "", MISSING],
    ["Basic instead of Bearer", `Basic ${btoa(ADMIN_TOKEN)}`, NOT_BEARER],
    ["the token without a scheme", ADMIN_TOKEN, NOT_BEARER],
    ["Bearer with two credentials", `Bearer ${ADMIN_TOKEN} ${ADMIN_TOKEN}`, NOT_BEARER],
    ["a truncated token", `Bearer ${ADMIN_TOKEN.slice(0, -1)}`, INVALID_ADMIN],
    ["the token with one character more", `Bearer ${ADMIN_TOKEN}A`, INVALID_ADMIN],
    ["the token with its last character changed", `Bearer ${ADMIN_TOKEN.slice(0, -1)}${otherAdmin}`, INVALID_ADMIN],
    ["the token in upper case", `Bearer ${ADMIN_TOKEN.toUpperCase()}`, INVALID_ADMIN],
    ["app A's secret key", `Bearer ${keyA}`, INVALID_ADMIN],
    ["app C's own secret key", `Bearer ${c.key.secretKey}`, INVALID_ADMIN],
    ["a session token", `Bearer ${ids.tokenA}`, INVALID_ADMIN],
    ["a grant token", `Bearer ${ids.grantA}`, INVALID_ADMIN],
    ["the JWT secret", `Bearer ${TEST_JWT_SECRET}`, INVALID_ADMIN],
    ["the upstream key", `Bearer ${UPSTREAM_KEY}`, INVALID_ADMIN],
  ];

  const { privateKey } = await generateKeyPair("RS256");
  const otherSecret = encode("another-secret-that-is-long-enough-0123456789");
  const [realHeader, realPayload, realSignature] = ids.tokenA.split(".") as [string, string, string];
  const forged: Array<[string, Promise<string> | string, string]> = [
    ["signed with another secret", forge({ key: otherSecret }), INVALID_TOKEN],
    ["HS512 with the right secret", forge({ header: { alg: "HS512" } }), INVALID_TOKEN],
    ["RS256 with its own key pair", forge({ header: { alg: "RS256" }, key: privateKey }), INVALID_TOKEN],
    ["alg none, unsigned", unsigned({ alg: "none", typ: "session+jwt" }, claimsFor(ids.appA)), INVALID_TOKEN],
    ["alg None, unsigned", unsigned({ alg: "None", typ: "session+jwt" }, claimsFor(ids.appA)), INVALID_TOKEN],
    [
      "a genuine token switched to alg none, signature kept",
      `${base64url.encode(JSON.stringify({ alg: "none", typ: "session+jwt" }))}.${realPayload}.${realSignature}`,
      INVALID_TOKEN,
    ],
    ["a genuine token without its signature", `${realHeader}.${realPayload}.`, INVALID_TOKEN],
    [
      "expired one second ago (genuinely signed)",
      forge({ claims: { iat: nowS - 601, exp: nowS - 1 } }),
      '{"error":{"code":"auth","message":"session token expired"}}',
    ],
    ["expiring exactly now (genuinely signed)", forge({ claims: { exp: nowS } }), '{"error":{"code":"auth","message":"session token expired"}}'],
    ["expired and signed with another secret", forge({ claims: { exp: nowS - 1 }, key: otherSecret }), INVALID_TOKEN],
    ["not valid before a future nbf", forge({ claims: { nbf: nowS + 60 } }), INVALID_TOKEN],
    ["issued in the future", forge({ claims: { iat: nowS + 3600, exp: nowS + 4200 } }), INVALID_TOKEN],
    ["wrong audience", forge({ claims: { aud: "someone-else" } }), INVALID_TOKEN],
    ["wrong issuer", forge({ claims: { iss: "evil-issuer" } }), INVALID_TOKEN],
    ["typ JWT instead of session+jwt", forge({ header: { typ: "JWT" } }), INVALID_TOKEN],
    ["no typ", forge({ header: { typ: undefined } }), INVALID_TOKEN],
    ...(["jti", "sub", "exp", "iat", "iss", "aud", "app_id", "key_id"] as const).map((claim): [string, Promise<string>, string] => [
      `missing ${claim}`,
      forge({ omit: [claim] }),
      INVALID_TOKEN,
    ]),
    ["empty sub", forge({ claims: { sub: "" } }), INVALID_TOKEN],
    ["key_id of app B's key", forge({ claims: { key_id: b.key.keyId } }), INVALID_TOKEN],
    ["key_id of app A's revoked key", forge({ claims: { key_id: revoked.keyId } }), INVALID_TOKEN],
    ["key_id not a string", forge({ claims: { key_id: 1 } }), INVALID_TOKEN],
    ["app_id of an app that does not exist", forge({ app: "appdoesnotexist1" }), INVALID_TOKEN],
    ["a genuine token of an app disabled since", disabledToken, APP_DISABLED],
    ["app_id of a disabled app, signed with another secret", forge({ app: disabled.app.id, key: otherSecret }), INVALID_TOKEN],
    ["a negative request_limit", forge({ claims: { request_limit: { monthlyUsd: -5 } } }), INVALID_TOKEN],
    ["a string request_limit", forge({ claims: { request_limit: { monthlyUsd: "5" } } }), INVALID_TOKEN],
    ["a zero request_limit", forge({ claims: { request_limit: { monthlyUsd: 0 } } }), INVALID_TOKEN],
    ["a genuine token with sub edited", editPayload(ids.tokenA, (c) => (c.sub = "someone-else")), INVALID_TOKEN],
    ["a genuine token with app_id edited to app B", editPayload(ids.tokenA, (c) => (c.app_id = ids.appB)), INVALID_TOKEN],
    ["a genuine token with request_limit raised", editPayload(ids.tokenA, (c) => (c.request_limit = { monthlyUsd: 1000 })), INVALID_TOKEN],
    ["a genuine token with exp extended", editPayload(ids.tokenA, (c) => (c.exp = (c.exp as number) + 86_400)), INVALID_TOKEN],
    ["app B's signature on app A's payload", `${realHeader}.${realPayload}.${tokenB.split(".")[2]}`, INVALID_TOKEN],
    ["not a JWT at all", "not-a-token", INVALID_TOKEN],
    ["three empty segments", "..", INVALID_TOKEN],
    ["garbage segments", "abc.def.ghi", INVALID_TOKEN],
  ];
  sessionVariants = [
    ["no Authorization header", null, MISSING],
    ["Basic instead of Bearer", `Basic ${btoa(ids.tokenA)}`, NOT_BEARER],
    ["the token without a scheme", ids.tokenA, NOT_BEARER],
    ["a valid secret key of the same app", `Bearer ${keyA}`, '{"error":{"code":"auth","message":"this endpoint takes a session token, not a secret key"}}'],
    ["a grant token", `Bearer ${ids.grantA}`, INVALID_TOKEN],
    ["the admin token", `Bearer ${ADMIN_TOKEN}`, INVALID_TOKEN],
  ];
  for (const [name, token, expected] of forged) {
    const value = remember(await token);
    for (const part of value.split(".")) remember(part);
    sessionVariants.push([`a token ${name}`, `Bearer ${value}`, expected]);
  }
});

describe("auth matrix", () => {
  test("controls: each endpoint answers with its valid credential, so every 401 below is the credential's doing", async () => {
    // Read-only and repeatable first; the two that change state last.
    for (const endpoint of [...SECRET_KEY_ENDPOINTS, ...SESSION_ENDPOINTS, ...ADMIN_ENDPOINTS].sort(
      (a, b) => Number(a.method === "DELETE") - Number(b.method === "DELETE"),
    )) {
      const credential = { secretKey: ids.keyA, session: ids.tokenA, admin: ADMIN_TOKEN }[endpoint.kind];
      currentGrant = endpoint.method === "DELETE" ? ids.grantSpare : ids.grantA;
      const res = await send(endpoint, `Bearer ${credential}`);
      expect({ endpoint: `${endpoint.method} ${endpoint.path}`, status: res.status }).toEqual({
        endpoint: `${endpoint.method} ${endpoint.path}`,
        status: endpoint.okStatus,
      });
    }
    currentGrant = ids.grantA;
    // The forging helper makes tokens the service accepts, so each forged variant below
    // fails for its one change.
    const forgedControl = remember(await forge({ claims: { sub: "forged-control" } }));
    expect(await expectOk(await send(SESSION_ENDPOINTS[0]!, `Bearer ${forgedControl}`))).toMatchObject({ appUserId: "forged-control" });
    // The state the matrix must leave alone: the victim connected at 3 USD, the grant active.
    await t.connect("victim", 3);
    appsAfterControls = await t.deps.store.apps.count();
  });

  for (const [kind, endpoints] of [
    ["secret-key", SECRET_KEY_ENDPOINTS],
    ["session-token", SESSION_ENDPOINTS],
    ["admin-token", ADMIN_ENDPOINTS],
  ] as const) {
    test(`every ${kind} variant on every ${kind} endpoint is 401 with the same envelope`, async () => {
      const variants = { "secret-key": secretKeyVariants, "session-token": sessionVariants, "admin-token": adminVariants }[kind];
      const uniform = { "secret-key": INVALID_KEY, "session-token": INVALID_TOKEN, "admin-token": INVALID_ADMIN }[kind];
      let checked = 0;
      for (const endpoint of endpoints) {
        for (const [name, header, expected] of variants) {
          const where = `${endpoint.method} ${endpoint.path} with ${name}`;
          const res = await send(endpoint, header);
          expect({ where, status: res.status }).toEqual({ where, status: 401 });
          const text = await expect401(res, header);
          expect({ where, text }).toEqual({ where, text: expected });
          checked++;
        }
      }
      expect(checked).toBe(endpoints.length * variants.length);
      expect(checked).toBeGreaterThan(0);
      // Most causes share one byte-identical body: which check failed is not told.
      expect(variants.filter(([, , e]) => e === uniform).length).toBeGreaterThan(variants.length / 2);
    });
  }

  test("nothing changed: no tampered call approved, revoked, spent or reached the upstream", async () => {
    const status = await expectOk(await t.get(`${API}/status?appUserId=victim`));
    expect(status).toMatchObject({ connected: true, limits: { monthlyUsd: 3 } });
    // Tokens edited to name app B act on nothing there either.
    const inB = await expectOk(
      await t.app.handle(new Request(`http://localhost${API}/status?appUserId=victim`, { headers: { authorization: `Bearer ${ids.keyB}` } })),
    );
    expect(inB.connected).toBe(false);
    const grant = await expectOk(await send(SECRET_KEY_ENDPOINTS[4]!, `Bearer ${ids.keyA}`));
    expect(grant).toMatchObject({ status: "active", uses: 0 });
    expect(t.mock.served.length).toBe(1); // the control's chat only
    // No tampered admin call created, changed or revoked anything.
    expect(await t.deps.store.apps.count()).toBe(appsAfterControls);
    expect((await t.deps.store.apps.find(ids.appC))?.name).toBe("C renamed");
  });

  test("rotation: the old key stays valid on every endpoint until it is revoked, then 401 everywhere, the session tokens it minted with it", async () => {
    const rotated = await issueKey(t.deps.store.apps, ids.appA, t.clock.now());
    liveKeyA = remember(rotated.secretKey);
    const mintedByOld = await mint(ids.keyA, "victim");
    const mintedByNew = await mint(rotated.secretKey, "victim");
    for (const endpoint of SESSION_ENDPOINTS.filter((e) => e.method === "GET")) {
      for (const token of [mintedByOld, mintedByNew]) expect((await send(endpoint, `Bearer ${token}`)).status).toBe(endpoint.okStatus);
    }
    const readOnly = SECRET_KEY_ENDPOINTS.filter((e) => e.path.includes("/status") || e.path.includes("/usage") || e.path.includes("/sessions"));
    for (const endpoint of readOnly) {
      expect((await send(endpoint, `Bearer ${ids.keyA}`)).status).toBe(endpoint.okStatus);
      expect((await send(endpoint, `Bearer ${rotated.secretKey}`)).status).toBe(endpoint.okStatus);
    }
    const original = (await t.deps.store.apps.activeKeysOf(ids.appA)).find((k) => k.id !== rotated.keyId)!;
    expect(await t.deps.store.apps.revokeKey(ids.appA, original.id, t.clock.now())).toBe(true);
    for (const endpoint of SECRET_KEY_ENDPOINTS) {
      expect(await expect401(await send(endpoint, `Bearer ${ids.keyA}`), ids.keyA)).toBe(INVALID_KEY);
    }
    for (const endpoint of readOnly) expect((await send(endpoint, `Bearer ${rotated.secretKey}`)).status).toBe(endpoint.okStatus);
    // The tokens the revoked key minted went with it; the new key's still work.
    for (const endpoint of SESSION_ENDPOINTS) expect(await expect401(await send(endpoint, `Bearer ${mintedByOld}`), mintedByOld)).toBe(INVALID_TOKEN);
    for (const endpoint of SESSION_ENDPOINTS.filter((e) => e.method === "GET")) {
      expect((await send(endpoint, `Bearer ${mintedByNew}`)).status).toBe(endpoint.okStatus);
    }
  });

  test("no key, secret, token or JWT segment used above appears in any log line (debug level)", async () => {
    // The service writes no line per request (no access log), so these are the start-up and
    // warning lines; the scan guards every line any future change adds.
    const key = liveKeyA;
    expect((await send(SECRET_KEY_ENDPOINTS[1]!, `Bearer ${key}`)).status).toBe(200);
    expect(t.logs.length).toBeGreaterThan(0);
    const leaksIn = (lines: string[]) =>
      lines.flatMap((line) => [...secrets].filter((s) => line.includes(s)).map((s) => `${s.slice(0, 10)}… in ${line.slice(0, 160)}`));
    // The scan itself can fail: it finds a planted key.
    expect(leaksIn([`{"msg":"x","key":"${ids.keyA}"}`])).not.toEqual([]);
    expect(secrets.size).toBeGreaterThan(100);
    expect(leaksIn(t.logs)).toEqual([]);
  });
});
