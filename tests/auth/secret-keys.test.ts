import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { makeTestApp } from "../helpers/test-app";
import { expectError, expectOk } from "../helpers/expect";
import { formatSecretKey, parseSecretKey, secretMatches, hashSecret } from "../../src/auth/secret-key";

const statusOf = (user = "u") => `/api/v1/status?appUserId=${user}`;

describe("secret keys: format and storage", () => {
  test("keys look like sk_live_{appId}_{secret}, app ids have no underscore", () => {
    const t = makeTestApp();
    for (let i = 0; i < 20; i++) {
      const { appId, secretKey } = t.createClientApp();
      expect(appId).not.toContain("_");
      expect(secretKey).toMatch(new RegExp(`^sk_live_${appId}_[0-9A-Za-z]{32}$`));
      expect(parseSecretKey(secretKey)).toEqual({ appId, secret: secretKey.slice(`sk_live_${appId}_`.length) });
    }
  });

  test("parseSecretKey refuses anything that is not exactly the format", () => {
    const secret = "A".repeat(32);
    expect(parseSecretKey(formatSecretKey("app1234", secret))).toEqual({ appId: "app1234", secret });
    for (const bad of [
      `sk_test_app1234_${secret}`,
      `sk_live_app_1234_${secret}`,
      `sk_live_APP1234_${secret}`,
      `sk_live_app1234_${secret.slice(1)}`,
      `sk_live_app1234_${secret}A`,
      `sk_live_app1234_${secret} `,
      ` sk_live_app1234_${secret}`,
      `sk_live__${secret}`,
      `sk_live_app1234_${"!".repeat(32)}`,
    ]) {
      expect(parseSecretKey(bad)).toBeNull();
    }
  });

  test("only SHA-256 of the secret part is stored, never the key", () => {
    const t = makeTestApp();
    const { appId, secretKey } = t.createClientApp();
    const secretPart = secretKey.slice(`sk_live_${appId}_`.length);
    const rows = t.deps.store.db.query<{ secret_hash: Uint8Array }, [string]>("SELECT secret_hash FROM app_keys WHERE app_id = ?").all(appId);
    expect(rows).toHaveLength(1);
    expect(Buffer.from(rows[0]!.secret_hash).toString("hex")).toBe(createHash("sha256").update(secretPart).digest("hex"));
    const dump = JSON.stringify(t.deps.store.db.query("SELECT * FROM app_keys").all(), (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString("latin1") : v));
    expect(dump).not.toContain(secretPart);
  });

  test("secretMatches compares against the stored hash", () => {
    expect(secretMatches("a".repeat(32), hashSecret("a".repeat(32)))).toBe(true);
    expect(secretMatches("a".repeat(32), hashSecret("b".repeat(32)))).toBe(false);
    expect(secretMatches("a".repeat(32), new Uint8Array(16))).toBe(false);
  });
});

describe("secret keys on /sessions and /status", () => {
  test("a valid key works on both, and the Bearer scheme is case-insensitive (RFC 6750, RFC 9110 §11.1)", async () => {
    const t = makeTestApp();
    const a = t.createClientApp();
    await expectOk(await t.call(statusOf(), { bearer: a.secretKey }));
    await expectOk(await t.call(statusOf(), { headers: { authorization: `bearer ${a.secretKey}` } }));
    await expectOk(await t.call("/api/v1/sessions", { bearer: a.secretKey, json: { appUserId: "u" } }));
  });

  const variants: Array<[string, (k: { appId: string; secretKey: string; otherAppId: string }) => Record<string, string>]> = [
    ["missing Authorization header", () => ({})],
    ["an empty Authorization header", () => ({ authorization: "" })],
    ["Basic instead of Bearer", (k) => ({ authorization: `Basic ${btoa(k.secretKey)}` })],
    ["the key without a scheme", (k) => ({ authorization: k.secretKey })],
    ["Bearer with nothing after it", () => ({ authorization: "Bearer " })],
    ["Bearer with two credentials", (k) => ({ authorization: `Bearer ${k.secretKey} ${k.secretKey}` })],
    ["a truncated key", (k) => ({ authorization: `Bearer ${k.secretKey.slice(0, -1)}` })],
    ["a key with one character changed", (k) => ({ authorization: `Bearer ${k.secretKey.slice(0, -1)}${k.secretKey.endsWith("A") ? "B" : "A"}` })],
    ["the other app's id with this app's secret", (k) => ({ authorization: `Bearer ${k.secretKey.replace(k.appId, k.otherAppId)}` })],
    ["an app id that does not exist", (k) => ({ authorization: `Bearer ${k.secretKey.replace(k.appId, "appnosuchapp0001")}` })],
    ["a test-mode prefix", (k) => ({ authorization: `Bearer ${k.secretKey.replace("sk_live_", "sk_test_")}` })],
  ];
  for (const [name, headers] of variants) {
    test(`401 auth: ${name}`, async () => {
      const t = makeTestApp();
      const a = t.createClientApp({ name: "A" });
      const b = t.createClientApp({ name: "B" });
      const h = headers({ appId: a.appId, secretKey: a.secretKey, otherAppId: b.appId });
      await expectError(await t.call(statusOf(), { headers: h }), 401, "auth");
      await expectError(await t.call("/api/v1/sessions", { headers: h, json: { appUserId: "u" } }), 401, "auth");
    });
  }

  test("rotation: a new key works while the old one still works, until it is revoked", async () => {
    const t = makeTestApp();
    const a = t.createClientApp();
    const rotated = t.deps.store.apps.issueKey(a.appId, t.clock.now());
    expect(rotated.secretKey).not.toBe(a.secretKey);
    await expectOk(await t.call(statusOf(), { bearer: a.secretKey }));
    await expectOk(await t.call(statusOf(), { bearer: rotated.secretKey }));

    expect(t.deps.store.apps.revokeKey(a.appId, a.keyId, t.clock.now())).toBe(true);
    await expectError(await t.call(statusOf(), { bearer: a.secretKey }), 401, "auth");
    await expectError(await t.call("/api/v1/sessions", { bearer: a.secretKey, json: { appUserId: "u" } }), 401, "auth");
    await expectOk(await t.call(statusOf(), { bearer: rotated.secretKey }));
    // Revoking twice, or another app's key, is refused.
    expect(t.deps.store.apps.revokeKey(a.appId, a.keyId, t.clock.now())).toBe(false);
    const b = t.createClientApp();
    expect(t.deps.store.apps.revokeKey(b.appId, rotated.keyId, t.clock.now())).toBe(false);
    await expectOk(await t.call(statusOf(), { bearer: rotated.secretKey }));
  });

  test("401 auth: a key of a disabled app", async () => {
    const t = makeTestApp();
    const a = t.createClientApp();
    await expectOk(await t.call(statusOf(), { bearer: a.secretKey }));
    t.deps.store.db.query("UPDATE apps SET disabled_at = ? WHERE id = ?").run(t.clock.now(), a.appId);
    await expectError(await t.call(statusOf(), { bearer: a.secretKey }), 401, "auth");
    await expectError(await t.call("/api/v1/sessions", { bearer: a.secretKey, json: { appUserId: "u" } }), 401, "auth");
  });

  test("error bodies never echo the presented key", async () => {
    const t = makeTestApp();
    const a = t.createClientApp();
    const wrong = `${a.secretKey.slice(0, -4)}abcd`;
    const res = await t.call(statusOf(), { bearer: wrong });
    expect(res.status).toBe(401);
    const text = await res.text();
    expect(text).not.toContain(wrong);
    expect(text).not.toContain(wrong.slice(-32));
  });
});
