/**
 * The admin API's apps and keys, and its token: off without ADMIN_TOKEN, 401 for anything
 * but the token, a lockout of wrong tokens after repeated ones (never of the right token).
 * Users, grants and usage are in admin-data.test.ts; the token against every other
 * credential in tests/security/auth-matrix.
 */
import { describe, expect, test } from "bun:test";
import { makeTestApp, mintSession } from "../helpers/test-app";
import { expectError, expectOk } from "../helpers/expect";
import { ADMIN, ADMIN_TOKEN, makeAdminTestApp } from "../helpers/admin";
import { pollUntil } from "../helpers/cluster";

const status = (t: { call: ReturnType<typeof makeTestApp>["call"] }, secretKey: string) => t.call("/api/v1/status?appUserId=u", { bearer: secretKey });

describe("the admin token", () => {
  test("without ADMIN_TOKEN every admin route is 404 not_found, whatever credential is sent", async () => {
    const t = makeTestApp();
    const a = await t.createClientApp();
    for (const [method, path] of [
      ["GET", "/apps"],
      ["POST", "/apps"],
      ["GET", `/apps/${a.appId}`],
      ["GET", `/apps/${a.appId}/usage?from=2026-01-01&to=2026-01-02`],
    ]) {
      await expectError(await t.call(`${ADMIN}${path!}`, { method, bearer: ADMIN_TOKEN }), 404, "not_found", /admin API is off/);
      await expectError(await t.call(`${ADMIN}${path!}`, { method, bearer: a.secretKey }), 404, "not_found");
    }
  });

  test("a missing, malformed or wrong token is 401; the failure is told before the body is read", async () => {
    const t = makeAdminTestApp();
    await expectError(await t.admin("/apps", { headers: { authorization: "" } }), 401, "auth", "missing Authorization header");
    await expectError(await t.admin("/apps", { headers: { authorization: ADMIN_TOKEN } }), 401, "auth", /Bearer <credential>/);
    await expectError(await t.admin("/apps", { bearer: `${ADMIN_TOKEN}x` }), 401, "auth", "invalid admin token");
    await expectError(await t.admin("/apps", { bearer: ADMIN_TOKEN.slice(0, -1) }), 401, "auth", "invalid admin token");
    // A malformed body with a wrong token: 401, not a 400 that would show the body was parsed.
    await expectError(await t.admin("/apps", { bearer: "wrong", json: "{not json" }), 401, "auth");
    await expectError(await t.admin("/apps", { bearer: "wrong", json: { name: 5 } }), 401, "auth");
    expect(await t.deps.store.apps.count()).toBe(0);
  });

  test("wrong tokens are counted per address: past RL_ADMIN_AUTH_LIMIT they get 429 with Retry-After until the window ends", async () => {
    const t = makeAdminTestApp({ env: { RL_ADMIN_AUTH_LIMIT: "3", RL_ADMIN_AUTH_WINDOW_SECONDS: "60" } });
    // Successes are not counted.
    for (let i = 0; i < 5; i++) await expectOk(await t.admin("/apps"));
    // Failures with a body (refused in the parse hook, before the body is read) count the same.
    for (let i = 0; i < 3; i++) await expectError(await t.admin("/apps", { bearer: "guess", json: { name: "x" } }), 401, "auth");
    const locked = await t.admin("/apps", { bearer: "guess" });
    expect(locked.headers.get("retry-after")).toBe("60");
    await expectError(locked, 429, "rate_limited");
    t.clock.advance(59_000);
    const stillLocked = await t.admin("/apps", { bearer: "another-guess" });
    expect(stillLocked.headers.get("retry-after")).toBe("1");
    await expectError(stillLocked, 429, "rate_limited");
    t.clock.advance(1_000);
    await expectError(await t.admin("/apps", { bearer: "guess" }), 401, "auth", "invalid admin token");
  });

  test("the right token is served whatever others failed from its address (one address for every client behind a proxy)", async () => {
    const t = makeAdminTestApp({ env: { RL_ADMIN_AUTH_LIMIT: "3", RL_ADMIN_AUTH_WINDOW_SECONDS: "60" } });
    for (let i = 0; i < 20; i++) await t.admin("/apps", { bearer: `guess-${i}` });
    await expectError(await t.admin("/apps", { bearer: "guess" }), 429, "rate_limited");
    await expectOk(await t.admin("/apps"));
    await expectOk(await t.admin("/apps", { json: { name: "made during a lockout" } }), 201);
    // Serving it neither ends the lockout nor counts: the next guess is still refused.
    await expectError(await t.admin("/apps", { bearer: "guess" }), 429, "rate_limited");
  });

  test("a request without a Bearer credential is refused 401 and never counted: it cannot start a lockout", async () => {
    const t = makeAdminTestApp({ env: { RL_ADMIN_AUTH_LIMIT: "3", RL_ADMIN_AUTH_WINDOW_SECONDS: "60" } });
    const tokenless = [
      { headers: { authorization: "" } },
      { headers: { authorization: `Basic ${btoa("admin:x")}` } },
      { headers: { authorization: ADMIN_TOKEN } },
    ];
    for (let i = 0; i < 10; i++) {
      for (const init of tokenless) await expectError(await t.admin("/apps", init), 401, "auth");
    }
    await expectOk(await t.admin("/apps"));
    // The window is still empty: three wrong tokens are refused 401, the fourth 429.
    for (let i = 0; i < 3; i++) await expectError(await t.admin("/apps", { bearer: "guess" }), 401, "auth", "invalid admin token");
    await expectError(await t.admin("/apps", { bearer: "guess" }), 429, "rate_limited");
    // A locked-out address without a token is still told it sent none, and counts nothing.
    await expectError(await t.admin("/apps", tokenless[0]), 401, "auth", "missing Authorization header");
  });

  test("the token is never logged; each admin call's log line names its route and app", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp();
    await expectOk(await t.admin(`/apps/${a.appId}`));
    await t.admin("/apps", { bearer: `${ADMIN_TOKEN}-wrong` });
    // The line is written once the response is done, after app.handle has returned.
    const lines = await pollUntil("two request lines", async () => {
      const found = t.logger.lines.filter((l) => l.includes('"msg":"request"'));
      return found.length >= 2 ? found : undefined;
    });
    expect(JSON.parse(lines[0]!)).toMatchObject({ route: `${ADMIN}/apps/:appId`, status: 200, appId: a.appId });
    expect(t.logger.lines.filter((l) => l.includes(ADMIN_TOKEN))).toEqual([]);
  });
});

describe("apps", () => {
  test("create: 201 with the secret key once, origins normalised; the key works at once", async () => {
    const t = makeAdminTestApp();
    const res = await t.admin("/apps", { json: { name: "Shop", origins: ["https://shop.example/", "http://localhost:3000"], maxGrantUsd: 2.5 } });
    const created = await expectOk(res, 201);
    expect(created).toEqual({
      appId: expect.stringMatching(/^app[a-z0-9]+$/),
      secretKey: expect.stringMatching(/^sk_live_app/),
      name: "Shop",
      origins: ["https://shop.example", "http://localhost:3000"],
      keyId: expect.any(String),
      maxGrantUsd: 2.5,
    });
    expect(await mintSession(t, created.secretKey, "alice")).toEqual(expect.any(String));
    const plain = await expectOk(await t.admin("/apps", { json: { name: "Plain" } }), 201);
    expect(plain.origins).toEqual([]);
    expect(plain).not.toHaveProperty("maxGrantUsd");
  });

  test("create and update refuse bad input with 400 naming the field", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp();
    const cases: Array<[string, string, unknown, RegExp]> = [
      ["POST", "/apps", {}, /^body\.name: is required/],
      ["POST", "/apps", { name: "" }, /^body\.name/],
      ["POST", "/apps", { name: " " }, /^name must not be empty/],
      ["POST", "/apps", { name: "x", origins: ["https://a.example/path"] }, /^origins https:\/\/a\.example\/path must be scheme/],
      ["POST", "/apps", { name: "x", origins: ["not a url"] }, /is not a URL origin/],
      ["POST", "/apps", { name: "x", maxGrantUsd: 0 }, /^maxGrantUsd must be a number > 0 \(or null\)/],
      ["POST", "/apps", { name: "x", maxGrantUsd: 1_000_001 }, /^maxGrantUsd must be at most 1000000/],
      ["POST", "/apps", { name: "x", grantDailyCeilingUsd: 0 }, /^grantDailyCeilingUsd must be a number > 0 \(or null\)/],
      ["PATCH", `/apps/${a.appId}`, {}, /^nothing to change: give name, origins, maxGrantUsd, grantDailyCeilingUsd or fundingSources/],
      ["PATCH", `/apps/${a.appId}`, { maxGrantUsd: -1 }, /^maxGrantUsd must be a number > 0/],
    ];
    for (const [method, path, json, message] of cases) await expectError(await t.admin(path, { method, json }), 400, "invalid_request", message);
    expect(await t.deps.store.apps.count()).toBe(1);
  });

  test("list, show and update; an unknown app is 404 on every app route", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp({ name: "one", origins: ["https://one.example"] });
    const listed = await expectOk(await t.admin("/apps"));
    expect(listed).toEqual({
      data: [
        {
          appId: a.appId,
          name: "one",
          origins: ["https://one.example"],
          maxGrantUsd: null,
          grantDailyCeilingUsd: null,
          fundingSources: ["app"],
          createdAt: "2026-01-15T00:00:00.000Z",
          disabledAt: null,
          keys: [{ keyId: a.keyId, createdAt: "2026-01-15T00:00:00.000Z", revokedAt: null }],
        },
      ],
    });
    expect(await expectOk(await t.admin(`/apps/${a.appId}`))).toEqual(listed.data[0]);

    const changes = { name: "renamed", origins: ["https://two.example/"], maxGrantUsd: 3, grantDailyCeilingUsd: 40 };
    const updated = await expectOk(await t.admin(`/apps/${a.appId}`, { method: "PATCH", json: changes }));
    expect(updated).toEqual({
      appId: a.appId,
      name: "renamed",
      origins: ["https://two.example"],
      maxGrantUsd: 3,
      grantDailyCeilingUsd: 40,
      fundingSources: ["app"],
    });
    expect(await t.deps.store.apps.find(a.appId)).toMatchObject({ maxGrantNano: 3e9, grantDailyCeilingNano: 40e9 });
    const reset = await expectOk(await t.admin(`/apps/${a.appId}`, { method: "PATCH", json: { maxGrantUsd: null, grantDailyCeilingUsd: null } }));
    expect(reset).toEqual({ ...updated, maxGrantUsd: null, grantDailyCeilingUsd: null });

    const unknown: Array<[string, string, unknown?]> = [
      ["GET", "/apps/appnope"],
      ["PATCH", "/apps/appnope", { name: "x" }],
      ["POST", "/apps/appnope/disable"],
      ["POST", "/apps/appnope/enable"],
      ["GET", "/apps/appnope/keys"],
      ["POST", "/apps/appnope/keys"],
      ["DELETE", `/apps/appnope/keys/${a.keyId}`],
    ];
    for (const [method, path, json] of unknown) await expectError(await t.admin(path, { method, json }), 404, "not_found", /^no app appnope|^no active key/);
  });

  test("disable refuses the app's keys at once; enable accepts them again", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp();
    expect(await expectOk(await t.admin(`/apps/${a.appId}/disable`, { method: "POST" }))).toEqual({ appId: a.appId, disabled: true });
    await expectError(await status(t, a.secretKey), 401, "auth");
    expect((await expectOk(await t.admin(`/apps/${a.appId}`))).disabledAt).toBe("2026-01-15T00:00:00.000Z");
    expect(await expectOk(await t.admin(`/apps/${a.appId}/enable`, { method: "POST" }))).toEqual({ appId: a.appId, disabled: false });
    await expectOk(await status(t, a.secretKey));
  });
});

describe("keys", () => {
  test("rotate issues a working key (201, secret once); revoke retires the old one; list shows both without secrets", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp();
    t.clock.advance(1000); // keys list oldest first
    const rotated = await expectOk(await t.admin(`/apps/${a.appId}/keys`, { method: "POST" }), 201);
    expect(rotated).toEqual({ appId: a.appId, keyId: expect.stringMatching(/^key/), secretKey: expect.stringMatching(new RegExp(`^sk_live_${a.appId}_`)) });
    await expectOk(await status(t, rotated.secretKey));
    await expectOk(await status(t, a.secretKey));

    t.clock.advance(1000);
    const revoked = await t.admin(`/apps/${a.appId}/keys/${a.keyId}`, { method: "DELETE" });
    expect(await expectOk(revoked)).toEqual({ appId: a.appId, keyId: a.keyId, revoked: true });
    await expectError(await status(t, a.secretKey), 401, "auth");
    await expectOk(await status(t, rotated.secretKey));
    await expectError(await t.admin(`/apps/${a.appId}/keys/${a.keyId}`, { method: "DELETE" }), 404, "not_found", `no active key ${a.keyId} for app ${a.appId}`);

    const keys = await t.admin(`/apps/${a.appId}/keys`);
    const text = await keys.clone().text();
    expect((await expectOk(keys)).data).toEqual([
      { appId: a.appId, keyId: a.keyId, createdAt: "2026-01-15T00:00:00.000Z", revokedAt: "2026-01-15T00:00:02.000Z" },
      { appId: a.appId, keyId: rotated.keyId, createdAt: "2026-01-15T00:00:01.000Z", revokedAt: null },
    ]);
    expect(text).not.toContain(rotated.secretKey.split("_").pop()!);
  });
});
