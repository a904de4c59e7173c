/**
 * Secrets at rest on both engines (a SQLite file, a real PostgreSQL server): webhook signing
 * secrets and the generated JWT secret are stored sealed, bound to their row; plaintext left
 * by an older version is sealed at open; a store opened with another key is refused, until
 * `secrets reset` drops what that key cannot open.
 */
import { describe, expect, test } from "bun:test";
import type { Store } from "../../src/store";
import { SealedSecretError, SecretBox, sealedContext } from "../../src/secrets/secret-box";
import { forgetUnreadableSecrets, JWT_SECRET_SETTING, SecretsKeyMismatchError, secureStoredSecrets, storedJwtSecret } from "../../src/store/stored-secrets";
import { createAppWithKey } from "../../src/services/operator/secret-keys";
import { sealedStoreEngines, sqliteFileBytes, type SealedStoreOpener as Opener } from "../helpers/store-engines";

const T0 = Date.UTC(2026, 0, 15);
const LEASE = 1000;

/** A fresh database per case; `open(box)` opens a store (another process, when called twice) on it. */
const engines = sealedStoreEngines();

describe.each(engines)("secrets at rest on %s", (engine, database) => {
  async function withStore(work: (store: Store, open: Opener) => Promise<void>): Promise<void> {
    const open = await database();
    const store = await open(SecretBox.random());
    try {
      await work(store, open);
    } finally {
      await store.close();
    }
  }

  /** An endpoint with one pending delivery: a connection approved for a user of its app. */
  async function endpointWithDelivery(store: Store, appId: string, user: string) {
    const endpoint = await store.webhooks.createEndpoint(appId, `https://hooks.example/${user}`, null, T0);
    await store.connections.approve(appId, user, 1_000, T0);
    return endpoint;
  }
  const storedOf = async (store: Store, endpointId: string) => (await store.webhooks.storedSecrets()).find((s) => s.endpointId === endpointId)!.stored;

  test("a webhook secret is stored sealed and bound to its endpoint; a claimed delivery carries it opened", () =>
    withStore(async (store) => {
      const { app } = await createAppWithKey(store.apps, "a", [], T0);
      const endpoint = await endpointWithDelivery(store, app.id, "alice");
      expect(endpoint.secret).toMatch(/^whsec_/);
      const stored = await storedOf(store, endpoint.id);
      expect(stored).toMatch(new RegExp(`^enc:v1:${store.secrets.current.id}:`));
      expect(stored).not.toContain(endpoint.secret.slice("whsec_".length, 20));
      expect(store.secrets.open(stored, sealedContext.webhookEndpoint(endpoint.id))).toBe(endpoint.secret);
      expect(await store.webhooks.listEndpoints(app.id)).toEqual([expect.not.objectContaining({ secret: expect.anything() })]);
      const [due] = await store.webhooks.claimDue(T0, 10, LEASE);
      expect(due).toMatchObject({ endpointId: endpoint.id, secret: endpoint.secret });
    }));

  test("two endpoints' sealed secrets swapped: neither opens, no delivery is signed; swapped back, both are sent", () =>
    withStore(async (store) => {
      const { app } = await createAppWithKey(store.apps, "a", [], T0);
      const two = await store.webhooks.createEndpoint(app.id, "https://hooks.example/two", null, T0);
      const one = await endpointWithDelivery(store, app.id, "alice"); // the approval goes to both
      const [sealedOne, sealedTwo] = [await storedOf(store, one.id), await storedOf(store, two.id)];
      expect(await store.webhooks.replaceStoredSecret(one.id, sealedOne, sealedTwo)).toBe(true);
      expect(await store.webhooks.replaceStoredSecret(two.id, sealedTwo, sealedOne)).toBe(true);
      for (const id of [one.id, two.id]) {
        const stored = await storedOf(store, id);
        expect(() => store.secrets.open(stored, sealedContext.webhookEndpoint(id))).toThrow(SealedSecretError);
      }
      // Claimed without a secret: nothing can be signed with either (the dispatcher fails each alone).
      const unsigned = await store.webhooks.claimDue(T0, 10, LEASE);
      expect(unsigned.map((d) => [d.endpointId, d.secret]).sort()).toEqual([one.id, two.id].map((id) => [id, null]).sort());

      await store.webhooks.replaceStoredSecret(one.id, sealedTwo, sealedOne);
      await store.webhooks.replaceStoredSecret(two.id, sealedOne, sealedTwo);
      // Due again once the claim's lease is over: delayed, not lost.
      const due = await store.webhooks.claimDue(T0 + LEASE, 10, LEASE);
      expect(due.map((d) => [d.endpointId, d.secret]).sort()).toEqual([one.id, two.id].map((id) => [id, id === one.id ? one.secret : two.secret]).sort());
    }));

  test("plaintext an older version stored is sealed at open, idempotently, and keeps working", () =>
    withStore(async (store) => {
      const { app } = await createAppWithKey(store.apps, "a", [], T0);
      const endpoint = await endpointWithDelivery(store, app.id, "alice");
      // As an older version wrote them: the JWT secret and the webhook secret in clear.
      await store.webhooks.replaceStoredSecret(endpoint.id, await storedOf(store, endpoint.id), "whsec_plainOldSecret");
      await store.settings.claim(JWT_SECRET_SETTING, "old-plain-jwt-secret");

      await secureStoredSecrets(store);
      const sealedHook = await storedOf(store, endpoint.id);
      const sealedJwt = (await store.settings.get(JWT_SECRET_SETTING))!;
      for (const value of [sealedHook, sealedJwt]) expect(value).toStartWith("enc:v1:");
      expect(sealedJwt).not.toContain("old-plain");
      await secureStoredSecrets(store);
      expect([await storedOf(store, endpoint.id), await store.settings.get(JWT_SECRET_SETTING)]).toEqual([sealedHook, sealedJwt]);

      expect(await storedJwtSecret(store, () => "a new one")).toBe("old-plain-jwt-secret");
      const [due] = await store.webhooks.claimDue(T0, 10, LEASE);
      expect(due!.secret).toBe("whsec_plainOldSecret");
      if (engine === "sqlite") {
        // Replaced, not left behind in the file's free space or in the WAL.
        const files = sqliteFileBytes(store);
        for (const secret of ["old-plain-jwt-secret", "whsec_plainOldSecret"]) expect(files.some((bytes) => bytes.includes(secret))).toBe(false);
      }
    }));

  test("a store that holds no secret yet (JWT_SECRET set, no webhook) still refuses a second key: its key check", () =>
    withStore(async (store, open) => {
      await secureStoredSecrets(store);
      const other = await open(SecretBox.random());
      try {
        await expect(secureStoredSecrets(other)).rejects.toThrow(SecretsKeyMismatchError);
      } finally {
        await other.close();
      }
      const same = await open(store.secrets);
      await secureStoredSecrets(same).finally(() => same.close());
    }));

  test("another key is refused at open, naming SECRETS_KEY; after `secrets reset` the store is usable under the new key", () =>
    withStore(async (store, open) => {
      const { app } = await createAppWithKey(store.apps, "a", [], T0);
      const endpoint = await store.webhooks.createEndpoint(app.id, "https://hooks.example/x", ["connection.revoked"], T0);
      await store.connections.approve(app.id, "payer", 1_000, T0, { source: "user", upstreamKey: "sk-or-v1-payer-key" });
      const flow = { appId: app.id, appUserId: "linker", sessionId: "jti-1", codeVerifier: "v".repeat(43), monthlyCapNano: 1_000 };
      const state = await store.fundingFlows.create(flow, T0, 600_000);
      await secureStoredSecrets(store);
      const jwt = await storedJwtSecret(store, () => "the first jwt secret");

      const newKey = SecretBox.random();
      const other = await open(newKey);
      try {
        const refused = await secureStoredSecrets(other).catch((err: unknown) => err);
        expect(refused).toBeInstanceOf(SecretsKeyMismatchError);
        expect((refused as Error).message).toContain("SECRETS_KEY");
        expect((refused as Error).message).toContain(store.secrets.current.id);
        await expect(storedJwtSecret(other, () => "regenerated")).rejects.toThrow(SecretsKeyMismatchError);

        expect(await forgetUnreadableSecrets(other, T0 + 1)).toEqual({
          jwtSecret: true,
          webhookEndpoints: [{ endpointId: endpoint.id, appId: app.id, url: "https://hooks.example/x", events: ["connection.revoked"] }],
          userKeys: [{ appId: app.id, appUserId: "payer" }],
          fundingFlows: 1,
        });
        await secureStoredSecrets(other);
        expect(await storedJwtSecret(other, () => "regenerated")).toBe("regenerated");
        expect(await other.webhooks.listEndpoints(app.id)).toEqual([]);
        // The user pays with their own account still, and must link a key again.
        expect(await other.connections.findActive(app.id, "payer")).toMatchObject({ fundingSource: "user", fundingStatus: "invalid", userKey: null });
        expect(await other.connections.userUpstreamKey(app.id, "payer")).toBeNull();
        expect(await other.fundingFlows.take(state, "jti-1", T0 + 1)).toBeNull();
        // And now the old key is the one refused.
        await expect(secureStoredSecrets(store)).rejects.toThrow(SecretsKeyMismatchError);
        expect(jwt).toBe("the first jwt secret");
      } finally {
        await other.close();
      }
    }));
});
