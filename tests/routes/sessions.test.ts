import { describe, expect, test } from "bun:test";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { makeTestApp, T0 } from "../helpers/test-app";
import { expectError, expectOk } from "../helpers/expect";

const SESSIONS = "/api/v1/sessions";

describe("POST /api/v1/sessions", () => {
  test("mints a session token whose expiresAt is now + SESSION_TTL_SECONDS", async () => {
    const t = makeTestApp({ env: { SESSION_TTL_SECONDS: "120" }, now: T0 + 1_500 });
    const a = await t.createClientApp();
    const body = await expectOk<{ token: string; expiresAt: number }>(
      await t.call(SESSIONS, { bearer: a.secretKey, json: { appUserId: "user-1", requestLimit: { monthlyUsd: 25 } } }),
    );
    expect(Object.keys(body).sort()).toEqual(["expiresAt", "token"]);
    const nowSeconds = Math.floor((T0 + 1_500) / 1000);
    expect(body.expiresAt).toBe(nowSeconds + 120);

    const header = decodeProtectedHeader(body.token);
    expect(header).toEqual({ alg: "HS256", typ: "session+jwt" });
    const claims = decodeJwt(body.token);
    expect(claims).toMatchObject({
      iss: "metered-proxy",
      aud: "metered-proxy:connections",
      sub: "user-1",
      app_id: a.appId,
      request_limit: { monthlyUsd: 25 },
      iat: nowSeconds,
      exp: nowSeconds + 120,
    });
    expect(typeof claims.jti).toBe("string");
  });

  test("the default TTL is 600 seconds and every token has its own jti", async () => {
    const t = makeTestApp();
    const a = await t.createClientApp();
    const one = await expectOk(await t.call(SESSIONS, { bearer: a.secretKey, json: { appUserId: "u" } }));
    const two = await expectOk(await t.call(SESSIONS, { bearer: a.secretKey, json: { appUserId: "u" } }));
    expect(one.expiresAt).toBe(T0 / 1000 + 600);
    expect(decodeJwt(one.token).jti).not.toBe(decodeJwt(two.token).jti);
    expect(decodeJwt(one.token).request_limit).toBeUndefined();
  });

  test("accepts a requestLimit equal to MAX_MONTHLY_USD", async () => {
    const t = makeTestApp({ env: { MAX_MONTHLY_USD: "50" } });
    const a = await t.createClientApp();
    const res = await t.call(SESSIONS, { bearer: a.secretKey, json: { appUserId: "u", requestLimit: { monthlyUsd: 50 } } });
    expect(decodeJwt((await expectOk(res)).token).request_limit).toEqual({ monthlyUsd: 50 });
  });

  describe("400 invalid_request naming the bad field", () => {
    const cases: Array<[string, unknown, RegExp]> = [
      ["appUserId missing", {}, /^body\.appUserId: /],
      ["appUserId not a string", { appUserId: 42 }, /^body\.appUserId: /],
      ["appUserId empty", { appUserId: "" }, /^body\.appUserId: /],
      ["appUserId longer than 256", { appUserId: "x".repeat(257) }, /^body\.appUserId: /],
      ["requestLimit not an object", { appUserId: "u", requestLimit: 5 }, /^body\.requestLimit/],
      ["requestLimit.monthlyUsd missing", { appUserId: "u", requestLimit: {} }, /^body\.requestLimit\.monthlyUsd: /],
      ["requestLimit.monthlyUsd zero", { appUserId: "u", requestLimit: { monthlyUsd: 0 } }, /^body\.requestLimit\.monthlyUsd: /],
      ["requestLimit.monthlyUsd negative", { appUserId: "u", requestLimit: { monthlyUsd: -1 } }, /^body\.requestLimit\.monthlyUsd: /],
      ["requestLimit.monthlyUsd a string", { appUserId: "u", requestLimit: { monthlyUsd: "5" } }, /^body\.requestLimit\.monthlyUsd: /],
      ["requestLimit.monthlyUsd above MAX_MONTHLY_USD", { appUserId: "u", requestLimit: { monthlyUsd: 50.01 } }, /requestLimit\.monthlyUsd/],
    ];
    for (const [name, json, message] of cases) {
      test(name, async () => {
        const t = makeTestApp({ env: { MAX_MONTHLY_USD: "50" } });
        const a = await t.createClientApp();
        await expectError(await t.call(SESSIONS, { bearer: a.secretKey, json }), 400, "invalid_request", message);
      });
    }

    test("requestLimit.monthlyUsd 1e400 (JSON-parses to Infinity)", async () => {
      const t = makeTestApp();
      const a = await t.createClientApp();
      const json = '{"appUserId":"u","requestLimit":{"monthlyUsd":1e400}}';
      await expectError(await t.call(SESSIONS, { bearer: a.secretKey, json }), 400, "invalid_request", /requestLimit\.monthlyUsd/);
    });

    test("a body that is not JSON", async () => {
      const t = makeTestApp();
      const a = await t.createClientApp();
      await expectError(await t.call(SESSIONS, { bearer: a.secretKey, json: "{" }), 400, "invalid_request");
    });

    test("no body at all", async () => {
      const t = makeTestApp();
      const a = await t.createClientApp();
      await expectError(await t.call(SESSIONS, { bearer: a.secretKey, method: "POST" }), 400, "invalid_request");
    });
  });

  test("401 auth without a valid secret key, whatever the body", async () => {
    const t = makeTestApp();
    await t.createClientApp();
    await expectError(await t.call(SESSIONS, { json: { appUserId: "u" } }), 401, "auth");
  });

  test("429 rate_limited past RL_SESSIONS_LIMIT, per app, with Retry-After", async () => {
    const t = makeTestApp({ env: { RL_SESSIONS_LIMIT: "2", RL_SESSIONS_WINDOW_SECONDS: "60" } });
    const a = await t.createClientApp();
    const b = await t.createClientApp();
    for (let i = 0; i < 2; i++) await expectOk(await t.call(SESSIONS, { bearer: a.secretKey, json: { appUserId: "u" } }));
    const limited = await t.call(SESSIONS, { bearer: a.secretKey, json: { appUserId: "u" } });
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    await expectError(limited, 429, "rate_limited");
    await expectOk(await t.call(SESSIONS, { bearer: b.secretKey, json: { appUserId: "u" } }));
  });

  test("413 payload_too_large when the declared body exceeds MAX_BODY_BYTES", async () => {
    const t = makeTestApp({ env: { MAX_BODY_BYTES: "1024" } });
    const a = await t.createClientApp();
    const json = { appUserId: "x".repeat(2000) };
    const res = await t.call(SESSIONS, { bearer: a.secretKey, json, headers: { "content-length": String(JSON.stringify(json).length) } });
    await expectError(res, 413, "payload_too_large");
  });
});
