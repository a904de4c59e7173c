/**
 * Rotating the secrets key (`keys rotate-kek`) on both engines: everything sealed under the
 * old key (the key check, the JWT secret, webhook secrets, users' upstream keys, pending
 * PKCE verifiers) is re-sealed under the new one, so that a store opened with the new key
 * alone reads it all; a second run re-seals nothing; a value no key opens is named and left.
 */
import { describe, expect, test } from "bun:test";
import type { Store } from "../../src/store";
import { SecretBox, sealedContext } from "../../src/secrets/secret-box";
import { JWT_SECRET_SETTING, SecretsKeyMismatchError, secureStoredSecrets, storedJwtSecret } from "../../src/store/stored-secrets";
import { resealStoredSecrets, UnopenedSecretsError } from "../../src/store/secrets-rotation";
import { createAppWithKey } from "../../src/services/operator/secret-keys";
import { ApiError } from "../../src/errors";
import { sealedStoreEngines, sqliteFileBytes } from "../helpers/store-engines";

const T0 = Date.UTC(2026, 0, 15);
const USER_KEY = "sk-or-v1-rotation-5b0e6a1f9d2c4e7a";
const VERIFIER = "rotation-verifier-".padEnd(64, "q");

const engines = sealedStoreEngines();

/** A store holding one sealed value of each kind, under `oldKey`. */
async function storeWithEverySecret(store: Store) {
  await secureStoredSecrets(store);
  const jwt = await storedJwtSecret(store, () => "the jwt secret");
  const { app } = await createAppWithKey(store.apps, "a", [], T0);
  const endpoint = await store.webhooks.createEndpoint(app.id, "https://hooks.example/r", null, T0);
  await store.connections.approve(app.id, "payer", 1_000, T0, { source: "user", upstreamKey: USER_KEY });
  const state = await store.fundingFlows.create(
    { appId: app.id, appUserId: "linker", sessionId: "jti", codeVerifier: VERIFIER, monthlyCapNano: 1 },
    T0,
    600_000,
  );
  return { jwt, appId: app.id, endpoint, state };
}

const sealedValues = async (store: Store) => [
  (await store.settings.get(JWT_SECRET_SETTING))!,
  ...(await store.webhooks.storedSecrets()).map((s) => s.stored),
  ...(await store.connections.storedUserKeys()).map((s) => s.stored),
  ...(await store.fundingFlows.storedVerifiers()).map((s) => s.stored),
];

describe.each(engines)("rotating the secrets key on %s", (engine, database) => {
  test("re-seals every kind under the new key, once; the new key alone then opens everything, the old one nothing", async () => {
    const open = await database();
    const oldKey = SecretBox.random();
    const newKey = SecretBox.random();
    const before = await open(oldKey);
    const { jwt, appId, endpoint, state } = await storeWithEverySecret(before);
    const oldSealed = await sealedValues(before);
    await before.close();

    const rotating = await open(new SecretBox(newKey.current, [oldKey.current]));
    await secureStoredSecrets(rotating); // the ring opens the old key check: the start is not refused
    expect(await resealStoredSecrets(rotating)).toEqual({ keyId: newKey.current.id, settings: 2, webhookSecrets: 1, userKeys: 1, fundingFlows: 1 });
    expect(await resealStoredSecrets(rotating)).toEqual({ keyId: newKey.current.id, settings: 0, webhookSecrets: 0, userKeys: 0, fundingFlows: 0 });
    for (const value of await sealedValues(rotating)) expect(SecretBox.keyIdOf(value)).toBe(newKey.current.id);
    if (engine === "sqlite") {
      // The values sealed under the retired key are overwritten in the file and its WAL.
      const files = sqliteFileBytes(rotating);
      for (const value of oldSealed) expect(files.some((bytes) => bytes.includes(value))).toBe(false);
    }
    await rotating.close();

    const after = await open(newKey);
    try {
      await secureStoredSecrets(after);
      expect(await storedJwtSecret(after, () => "regenerated")).toBe(jwt);
      expect(await after.connections.userUpstreamKey(appId, "payer")).toBe(USER_KEY);
      const [due] = await after.webhooks.claimDue(T0, 10, 1_000);
      expect(due!.secret).toBe(endpoint.secret);
      expect(await after.fundingFlows.take(state, "jti", T0)).toMatchObject({ codeVerifier: VERIFIER });
    } finally {
      await after.close();
    }
    const retired = await open(oldKey);
    await expect(secureStoredSecrets(retired).finally(() => retired.close())).rejects.toThrow(SecretsKeyMismatchError);
  });

  test("a process whose ring lacks the key the store was re-sealed under refuses to seal new values (503, said once), and none is left under its key", async () => {
    const open = await database();
    const oldKey = SecretBox.random();
    const newKey = SecretBox.random();
    const warnings: string[] = [];
    // A server that was not given the new key: it holds the old one alone, and stays up through the rotation.
    const stale = await open(new SecretBox(oldKey.current, [], "SECRETS_KEY", (message) => warnings.push(message)));
    const rotating = await open(new SecretBox(newKey.current, [oldKey.current]));
    try {
      const { appId } = await storeWithEverySecret(stale);
      // Before the rotation it seals as usual.
      await stale.webhooks.createEndpoint(appId, "https://hooks.example/before", null, T0);
      await secureStoredSecrets(rotating);
      await resealStoredSecrets(rotating);

      const refusals = [
        () => stale.webhooks.createEndpoint(appId, "https://hooks.example/after", null, T0),
        () => stale.connections.approve(appId, "late-payer", 1_000, T0, { source: "user", upstreamKey: "sk-or-v1-late" }),
        () => stale.fundingFlows.create({ appId, appUserId: "late-linker", sessionId: "jti2", codeVerifier: VERIFIER, monthlyCapNano: 1 }, T0, 600_000),
      ];
      for (const write of refusals) {
        const err = await write().then(
          () => null,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(ApiError);
        expect((err as ApiError).code).toBe("unavailable");
        expect((err as ApiError).message).toContain("restarted with its new secrets key");
      }
      // Said once, naming both key ids and the fix, never a key.
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(newKey.current.id);
      expect(warnings[0]).toContain(oldKey.current.id);
      expect(warnings[0]).toContain("restart it with the new SECRETS_KEY");
      expect(warnings[0]).not.toContain(newKey.current.bytes.toString("base64"));
      // Nothing was written for the refused values, and nothing the store keeps is sealed under the retired key.
      expect((await rotating.webhooks.listEndpoints(appId)).map((e) => e.url)).not.toContain("https://hooks.example/after");
      expect(await rotating.connections.find(appId, "late-payer")).toBeNull();
      for (const value of await sealedValues(rotating)) expect(SecretBox.keyIdOf(value)).toBe(newKey.current.id);
      // A process that holds the new key (the CLI here) still seals.
      await rotating.webhooks.createEndpoint(appId, "https://hooks.example/rotated", null, T0);
      // App-funded approvals seal nothing, so the fence does not stop them.
      await stale.connections.approve(appId, "app-paid", 1_000, T0);
    } finally {
      await stale.close();
      await rotating.close();
    }
  });

  test("a value no key of the ring opens is named by what it is and its key id, left as it was; the others are re-sealed", async () => {
    const open = await database();
    const oldKey = SecretBox.random();
    const store = await open(new SecretBox(SecretBox.random().current, [oldKey.current]));
    try {
      const { appId } = await storeWithEverySecret(store);
      await store.connections.approve(appId, "other", 1_000, T0, { source: "user", upstreamKey: "sk-or-v1-other" });
      // As if sealed by a key the operator forgot to list.
      const lost = SecretBox.random();
      const context = sealedContext.connectionUserKey(appId, "payer");
      const [payer] = (await store.connections.storedUserKeys()).filter((k) => k.appUserId === "payer");
      await store.connections.replaceStoredUserKey(appId, "payer", payer!.stored, lost.seal(USER_KEY, context));
      const other = (await store.connections.storedUserKeys()).find((k) => k.appUserId === "other")!;
      await store.connections.replaceStoredUserKey(
        appId,
        "other",
        other.stored,
        oldKey.seal("sk-or-v1-other", sealedContext.connectionUserKey(appId, "other")),
      );

      const refused = await resealStoredSecrets(store).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(UnopenedSecretsError);
      expect((refused as Error).message).toContain(`${context} was sealed with secrets key id ${lost.current.id}`);
      expect((refused as Error).message).toContain("SECRETS_KEY_PREVIOUS");
      expect((refused as Error).message).not.toContain(USER_KEY);
      expect(await store.connections.userUpstreamKey(appId, "other")).toBe("sk-or-v1-other");
      expect(SecretBox.keyIdOf((await store.connections.storedUserKeys()).find((k) => k.appUserId === "other")!.stored)).toBe(store.secrets.current.id);
      expect(SecretBox.keyIdOf((await store.connections.storedUserKeys()).find((k) => k.appUserId === "payer")!.stored)).toBe(lost.current.id);
    } finally {
      await store.close();
    }
  });
});
