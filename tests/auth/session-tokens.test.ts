/**
 * Session JWT verification: a matrix of tampered and foreign tokens, each of which must get
 * 401 `auth` on every /connections method and change nothing. The control case proves the
 * forging helper makes tokens the service accepts, so each other case fails for its one change.
 */
import { describe, expect, test } from "bun:test";
import { SignJWT, base64url, generateKeyPair } from "jose";
import { makeTestApp, mintSession, T0, TEST_JWT_SECRET, type TestApp } from "../helpers/test-app";
import { expectError, expectOk } from "../helpers/expect";

const CONNECTIONS = "/api/v1/connections";
const NOW_S = Math.floor(T0 / 1000);
const secret = (s: string) => new TextEncoder().encode(s);

interface ForgeOptions {
  header?: Record<string, unknown>;
  claims?: Record<string, unknown>;
  omit?: string[];
  key?: Uint8Array | CryptoKey;
}

function baseClaims(appId: string): Record<string, unknown> {
  return {
    app_id: appId,
    iss: "metered-proxy",
    aud: "metered-proxy:connections",
    sub: "victim",
    iat: NOW_S,
    exp: NOW_S + 600,
    jti: crypto.randomUUID(),
  };
}

async function forge(appId: string, opts: ForgeOptions = {}): Promise<string> {
  const payload = { ...baseClaims(appId), ...opts.claims };
  for (const claim of opts.omit ?? []) delete payload[claim];
  const header = { alg: "HS256", typ: "session+jwt", ...opts.header };
  return new SignJWT(payload).setProtectedHeader(header as { alg: string }).sign(opts.key ?? secret(TEST_JWT_SECRET));
}

function unsigned(header: Record<string, unknown>, payload: Record<string, unknown>, signature = ""): string {
  const encode = (v: unknown) => base64url.encode(JSON.stringify(v));
  return `${encode(header)}.${encode(payload)}.${signature}`;
}

/** Re-encodes a real token's payload with `edit` applied, keeping the original signature. */
function editPayload(token: string, edit: (claims: Record<string, unknown>) => void): string {
  const [header, payload, signature] = token.split(".") as [string, string, string];
  const claims = JSON.parse(new TextDecoder().decode(base64url.decode(payload))) as Record<string, unknown>;
  edit(claims);
  return `${header}.${base64url.encode(JSON.stringify(claims))}.${signature}`;
}

async function setup() {
  const t = makeTestApp();
  const a = t.createClientApp({ name: "A" });
  const b = t.createClientApp({ name: "B" });
  return { t, a, b };
}

/** Every /connections method refuses the token with 401 auth, and the user stays unconnected. */
async function expectRefusedEverywhere(t: TestApp, token: string, appSecretKey: string, user = "victim"): Promise<void> {
  await expectError(await t.call(CONNECTIONS, { bearer: token }), 401, "auth");
  await expectError(await t.call(CONNECTIONS, { bearer: token, json: { monthlyUsd: 1 } }), 401, "auth");
  await expectError(await t.call(CONNECTIONS, { method: "DELETE", bearer: token }), 401, "auth");
  const status = await expectOk(await t.call(`/api/v1/status?appUserId=${user}`, { bearer: appSecretKey }));
  expect(status.connected).toBe(false);
}

describe("session token verification", () => {
  test("control: a token forged with the right secret and claims is accepted", async () => {
    const { t, a } = await setup();
    const token = await forge(a.appId);
    expect((await expectOk(await t.call(CONNECTIONS, { bearer: token }))).appUserId).toBe("victim");
  });

  const forged: Array<[string, (ids: { a: string; b: string }) => Promise<string> | string]> = [
    ["signed with another secret", ({ a }) => forge(a, { key: secret("another-secret-that-is-long-enough-0123456789") })],
    ["HS512 with the right secret (algorithm not pinned)", ({ a }) => forge(a, { header: { alg: "HS512" } })],
    ["alg none, unsigned", ({ a }) => unsigned({ alg: "none", typ: "session+jwt" }, baseClaims(a))],
    ["alg none, lower case", ({ a }) => unsigned({ alg: "None", typ: "session+jwt" }, baseClaims(a))],
    ["expired one second ago", ({ a }) => forge(a, { claims: { iat: NOW_S - 601, exp: NOW_S - 1 } })],
    ["expiring exactly now", ({ a }) => forge(a, { claims: { exp: NOW_S } })],
    ["not valid before a future nbf", ({ a }) => forge(a, { claims: { nbf: NOW_S + 60 } })],
    ["wrong audience", ({ a }) => forge(a, { claims: { aud: "someone-else" } })],
    ["wrong issuer", ({ a }) => forge(a, { claims: { iss: "evil-issuer" } })],
    ["typ JWT instead of session+jwt", ({ a }) => forge(a, { header: { typ: "JWT" } })],
    ["no typ", ({ a }) => forge(a, { header: { typ: undefined } })],
    ["missing jti", ({ a }) => forge(a, { omit: ["jti"] })],
    ["missing sub", ({ a }) => forge(a, { omit: ["sub"] })],
    ["empty sub", ({ a }) => forge(a, { claims: { sub: "" } })],
    ["missing exp", ({ a }) => forge(a, { omit: ["exp"] })],
    ["missing iat", ({ a }) => forge(a, { omit: ["iat"] })],
    ["missing iss", ({ a }) => forge(a, { omit: ["iss"] })],
    ["missing aud", ({ a }) => forge(a, { omit: ["aud"] })],
    ["missing app_id", ({ a }) => forge(a, { omit: ["app_id"] })],
    ["app_id of an app that does not exist", () => forge("appdoesnotexist1")],
    ["a negative request_limit", ({ a }) => forge(a, { claims: { request_limit: { monthlyUsd: -5 } } })],
    ["a string request_limit", ({ a }) => forge(a, { claims: { request_limit: { monthlyUsd: "5" } } })],
    ["a zero request_limit", ({ a }) => forge(a, { claims: { request_limit: { monthlyUsd: 0 } } })],
    ["not a JWT at all", () => "not-a-token"],
    ["three empty segments", () => ".."],
    ["garbage segments", () => "abc.def.ghi"],
  ];
  for (const [name, make] of forged) {
    test(`401 auth: ${name}`, async () => {
      const { t, a, b } = await setup();
      const token = await make({ a: a.appId, b: b.appId });
      await expectRefusedEverywhere(t, token, a.secretKey);
    });
  }

  test("401 auth: RS256 signed with its own key pair", async () => {
    const { t, a } = await setup();
    const { privateKey } = await generateKeyPair("RS256");
    const token = await forge(a.appId, { header: { alg: "RS256" }, key: privateKey });
    await expectRefusedEverywhere(t, token, a.secretKey);
  });

  describe("a real token with an edited payload and the original signature", () => {
    const edits: Array<[string, (claims: Record<string, unknown>, ids: { b: string }) => void]> = [
      ["sub changed to another user", (c) => (c.sub = "victim")],
      ["app_id changed to another app", (c, { b }) => (c.app_id = b)],
      ["request_limit raised", (c) => (c.request_limit = { monthlyUsd: 1_000 })],
      ["exp extended", (c) => (c.exp = (c.exp as number) + 86_400)],
    ];
    for (const [name, edit] of edits) {
      test(`401 auth: ${name}`, async () => {
        const { t, a, b } = await setup();
        const real = await mintSession(t, a.secretKey, "attacker", 1);
        const tampered = editPayload(real, (c) => edit(c, { b: b.appId }));
        expect(tampered).not.toBe(real);
        await expectRefusedEverywhere(t, tampered, a.secretKey);
        await expectRefusedEverywhere(t, tampered, b.secretKey);
      });
    }

    test("401 auth: header switched to alg none, signature kept", async () => {
      const { t, a } = await setup();
      const real = await mintSession(t, a.secretKey, "victim", 1);
      const [, payload, signature] = real.split(".");
      const header = base64url.encode(JSON.stringify({ alg: "none", typ: "session+jwt" }));
      await expectRefusedEverywhere(t, `${header}.${payload}.${signature}`, a.secretKey);
    });
  });

  test("401 auth: a valid token of an app that was disabled afterwards", async () => {
    const { t, a } = await setup();
    const token = await mintSession(t, a.secretKey, "victim", 5);
    await expectOk(await t.call(CONNECTIONS, { bearer: token }));
    t.deps.store.db.query("UPDATE apps SET disabled_at = ? WHERE id = ?").run(t.clock.now(), a.appId);
    await expectError(await t.call(CONNECTIONS, { bearer: token }), 401, "auth");
    await expectError(await t.call(CONNECTIONS, { bearer: token, json: { monthlyUsd: 1 } }), 401, "auth");
    await expectError(await t.call(CONNECTIONS, { method: "DELETE", bearer: token }), 401, "auth");
  });

  test("expiry is enforced by the injected clock: valid until exp, refused from exp on", async () => {
    const t = makeTestApp({ env: { SESSION_TTL_SECONDS: "60" } });
    const a = t.createClientApp();
    const token = await mintSession(t, a.secretKey, "u", 5);
    t.clock.advance(59_999);
    await expectOk(await t.call(CONNECTIONS, { bearer: token }));
    t.clock.advance(1);
    await expectError(await t.call(CONNECTIONS, { bearer: token }), 401, "auth", /expired/);
    await expectError(await t.call(CONNECTIONS, { bearer: token, json: { monthlyUsd: 1 } }), 401, "auth", /expired/);
  });

  test("error messages never echo the token", async () => {
    const { t, a } = await setup();
    const token = await forge(a.appId, { claims: { aud: "x" } });
    const res = await t.call(CONNECTIONS, { bearer: token });
    const text = await res.text();
    expect(res.status).toBe(401);
    expect(text).not.toContain(token);
    expect(text).not.toContain(token.split(".")[1]!);
  });
});
