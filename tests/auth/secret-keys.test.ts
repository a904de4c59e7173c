import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { makeTestApp } from "../helpers/test-app";
import { expectOk } from "../helpers/expect";
import { formatSecretKey, parseSecretKey, secretMatches, hashSecret } from "../../src/auth/secret-key";
import { issueKey } from "../../src/services/operator/secret-keys";

const statusOf = (user = "u") => `/api/v1/status?appUserId=${user}`;

describe("secret keys: format and storage", () => {
  test("keys look like sk_live_{appId}_{secret}, app ids have no underscore", async () => {
    const t = makeTestApp();
    for (let i = 0; i < 20; i++) {
      const { appId, secretKey } = await t.createClientApp();
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

  test("only SHA-256 of the secret part is stored, never the key", async () => {
    const t = makeTestApp();
    const { appId, secretKey } = await t.createClientApp();
    const secretPart = secretKey.slice(`sk_live_${appId}_`.length);
    const rows = t.db.query<{ secret_hash: Uint8Array }, [string]>("SELECT secret_hash FROM app_keys WHERE app_id = ?").all(appId);
    expect(rows).toHaveLength(1);
    expect(Buffer.from(rows[0]!.secret_hash).toString("hex")).toBe(createHash("sha256").update(secretPart).digest("hex"));
    const dump = JSON.stringify(t.db.query("SELECT * FROM app_keys").all(), (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString("latin1") : v));
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
    const a = await t.createClientApp();
    await expectOk(await t.call(statusOf(), { bearer: a.secretKey }));
    await expectOk(await t.call(statusOf(), { headers: { authorization: `bearer ${a.secretKey}` } }));
    await expectOk(await t.call("/api/v1/sessions", { bearer: a.secretKey, json: { appUserId: "u" } }));
  });

  // Every malformed, tampered, foreign, revoked and disabled key against every secret-key
  // endpoint, rotation over HTTP, and bodies that never echo a key: tests/security/auth-matrix.test.ts.

  test("revoking a key twice, or through another app, is refused", async () => {
    const t = makeTestApp();
    const a = await t.createClientApp();
    const b = await t.createClientApp();
    const rotated = await issueKey(t.deps.store.apps, a.appId, t.clock.now());
    expect(await t.deps.store.apps.revokeKey(a.appId, a.keyId, t.clock.now())).toBe(true);
    expect(await t.deps.store.apps.revokeKey(a.appId, a.keyId, t.clock.now())).toBe(false);
    expect(await t.deps.store.apps.revokeKey(b.appId, rotated.keyId, t.clock.now())).toBe(false);
    expect((await t.deps.store.apps.activeKeysOf(a.appId)).map((k) => k.id)).toEqual([rotated.keyId]);
  });
});
