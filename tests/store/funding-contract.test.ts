/**
 * Funding sources in the store contract, on both engines (in-memory SQLite, a real
 * PostgreSQL): the sources an app allows, who pays a connection, the user's own upstream key
 * sealed and bound to its connection, deleted by a revoke, and pending PKCE flows taken once.
 */
import { describe, expect, test } from "bun:test";
import type { Store } from "../../src/store";
import { SealedSecretError, SecretBox, sealedContext } from "../../src/secrets/secret-box";
import { createAppWithKey } from "../../src/services/operator/secret-keys";
import { userKeyFingerprint } from "../../src/store/connections";
import { fundingStateHash } from "../../src/store/funding-flows";
import { storeEngines, withStore as withOpenStore } from "../helpers/store-engines";

const engines = storeEngines();
const USER_KEY = "sk-or-v1-contract-0123456789abcdef";
const OTHER_KEY = "sk-or-v1-contract-fedcba9876543210";
const userFunding = (upstreamKey: string) => ({ source: "user" as const, upstreamKey });

describe.each(engines)("funding in the store contract on %s", (_name, open) => {
  const withStore = (work: (store: Store) => Promise<void>) => withOpenStore(open, work);
  const newApp = async (store: Store) => (await createAppWithKey(store.apps, "f", [], 1)).app;

  test("apps: funding sources are `app` unless set; create and update set them, other updates keep them", () =>
    withStore(async (store) => {
      const plain = await newApp(store);
      expect(plain.fundingSources).toEqual(["app"]);
      const both = (await createAppWithKey(store.apps, "both", [], 2, { fundingSources: ["app", "user"] })).app;
      expect(await store.apps.find(both.id)).toMatchObject({ fundingSources: ["app", "user"] });
      expect(await store.apps.update(plain.id, { fundingSources: ["user"] })).toMatchObject({ fundingSources: ["user"] });
      expect(await store.apps.update(plain.id, { name: "renamed", maxGrantNano: 5 })).toMatchObject({ name: "renamed", fundingSources: ["user"] });
      expect((await store.apps.list()).map((a) => a.fundingSources)).toEqual([["user"], ["app", "user"]]);
    }));

  test("a connection is paid by the app unless the user links a key; the key is stored sealed, bound to its connection", () =>
    withStore(async (store) => {
      const app = await newApp(store);
      expect(await store.connections.approve(app.id, "plain", 1_000, 10)).toMatchObject({ fundingSource: "app", userKey: null });
      expect(await store.connections.userUpstreamKey(app.id, "plain")).toBeNull();
      expect(await store.connections.userUpstreamKey(app.id, "nobody")).toBeNull();

      const linked = await store.connections.approve(app.id, "payer", 2_000, 20, userFunding(USER_KEY));
      expect(linked).toMatchObject({ fundingSource: "user", fundingStatus: "ok", userKey: { fingerprint: userKeyFingerprint(USER_KEY), linkedAt: 20 } });
      expect(linked.userKey!.fingerprint).toMatch(/^sha256:[0-9a-f]{12}$/);
      expect(JSON.stringify(await store.connections.listForApp(app.id, 10))).not.toContain(USER_KEY);
      expect(await store.connections.userUpstreamKey(app.id, "payer")).toBe(USER_KEY);

      const [stored] = await store.connections.storedUserKeys();
      // (Compared field by field: bun's toMatchObject puts its matchers into the object it checks.)
      expect([stored!.appId, stored!.appUserId]).toEqual([app.id, "payer"]);
      expect(stored!.stored).toStartWith(`enc:v1:${store.secrets.current.id}:`);
      expect(stored!.stored).not.toContain(USER_KEY);
      // Bound to its row: the same ciphertext does not open as another user's key.
      expect(() => store.secrets.open(stored!.stored, sealedContext.connectionUserKey(app.id, "plain"))).toThrow(SealedSecretError);
      expect(await store.connections.replaceStoredUserKey(app.id, "plain", stored!.stored, stored!.stored)).toBe(false);
      // A value sealed for another row does not open here: refused, never a wrong key handed to a call.
      const foreign = store.secrets.seal(USER_KEY, "elsewhere");
      expect(await store.connections.replaceStoredUserKey(app.id, "payer", stored!.stored, foreign)).toBe(true);
      await expect(store.connections.userUpstreamKey(app.id, "payer")).rejects.toThrow(SealedSecretError);
      expect(await store.connections.replaceStoredUserKey(app.id, "payer", stored!.stored, "changed")).toBe(false);
      expect(await store.connections.replaceStoredUserKey(app.id, "payer", foreign, stored!.stored)).toBe(true);
      expect(await store.connections.userUpstreamKey(app.id, "payer")).toBe(USER_KEY);
    }));

  test("a new cap keeps the user's key and its refusal; a new key restores funding; choosing `app` drops the key", () =>
    withStore(async (store) => {
      const app = await newApp(store);
      await store.connections.approve(app.id, "payer", 2_000, 20, userFunding(USER_KEY));
      const raised = await store.connections.approve(app.id, "payer", 3_000, 30);
      expect(raised).toMatchObject({ monthlyCapNano: 3_000, fundingSource: "user", userKey: { linkedAt: 20 }, connectedAt: 20 });
      expect(await store.connections.userUpstreamKey(app.id, "payer")).toBe(USER_KEY);

      await store.connections.markFundingInvalid(app.id, "payer", 40);
      expect(await store.connections.approve(app.id, "payer", 3_000, 50)).toMatchObject({ fundingStatus: "invalid", fundingSource: "user" });
      const relinked = await store.connections.approve(app.id, "payer", 3_000, 60, userFunding(OTHER_KEY));
      expect(relinked).toMatchObject({ fundingStatus: "ok", userKey: { fingerprint: userKeyFingerprint(OTHER_KEY), linkedAt: 60 }, connectedAt: 20 });
      expect(await store.connections.userUpstreamKey(app.id, "payer")).toBe(OTHER_KEY);

      const switched = await store.connections.approve(app.id, "payer", 3_000, 70, { source: "app" });
      expect(switched).toMatchObject({ fundingSource: "app", fundingStatus: "ok", userKey: null });
      expect(await store.connections.userUpstreamKey(app.id, "payer")).toBeNull();
      expect(await store.connections.storedUserKeys()).toEqual([]);
    }));

  test("a revoke deletes the user's key; approving again afterwards is paid by the app", () =>
    withStore(async (store) => {
      const app = await newApp(store);
      await store.connections.approve(app.id, "payer", 2_000, 20, userFunding(USER_KEY));
      await store.connections.revoke(app.id, "payer", 30);
      expect(await store.connections.find(app.id, "payer")).toMatchObject({ revokedAt: 30, fundingSource: "app", userKey: null });
      expect(await store.connections.userUpstreamKey(app.id, "payer")).toBeNull();
      expect(await store.connections.storedUserKeys()).toEqual([]);
      expect(await store.connections.approve(app.id, "payer", 2_000, 40)).toMatchObject({ fundingSource: "app", userKey: null, connectedAt: 40 });
      // Revoked with the user's key and approved again with a new one: a new connection, paid by the user.
      await store.connections.revoke(app.id, "payer", 50);
      expect(await store.connections.approve(app.id, "payer", 2_000, 60, userFunding(OTHER_KEY))).toMatchObject({ fundingSource: "user", connectedAt: 60 });
    }));

  test("forgetting a key nobody can open marks the connection funding invalid, once, and only while the key is the one expected", () =>
    withStore(async (store) => {
      const app = await newApp(store);
      await store.connections.approve(app.id, "payer", 2_000, 20, userFunding(USER_KEY));
      const { stored } = (await store.connections.storedUserKeys())[0]!;
      expect(await store.connections.forgetUserKey(app.id, "payer", "not it", 30)).toBe(false);
      expect(await store.connections.userUpstreamKey(app.id, "payer")).toBe(USER_KEY);
      expect(await store.connections.forgetUserKey(app.id, "payer", stored, 30)).toBe(true);
      expect(await store.connections.findActive(app.id, "payer")).toMatchObject({
        fundingSource: "user",
        fundingStatus: "invalid",
        userKey: null,
        updatedAt: 30,
      });
      expect(await store.connections.userUpstreamKey(app.id, "payer")).toBeNull();
      expect(await store.connections.forgetUserKey(app.id, "payer", stored, 40)).toBe(false);
    }));

  test("a funding flow: the state kept only hashed, the verifier sealed; taken once, by its session, before it expires", () =>
    withStore(async (store) => {
      const app = await newApp(store);
      const flow = { appId: app.id, appUserId: "linker", sessionId: "jti-1", codeVerifier: "verifier-".padEnd(64, "x"), monthlyCapNano: 7_000 };
      const state = await store.fundingFlows.create(flow, 100, 1_000);
      expect(state).toMatch(/^fs_[A-Za-z0-9_-]{40}$/);
      const [stored] = await store.fundingFlows.storedVerifiers();
      expect(stored!.stateHash).toBe(fundingStateHash(state));
      expect(stored!.stored).toStartWith("enc:v1:");
      expect(JSON.stringify(stored)).not.toContain(state);
      expect(JSON.stringify(stored)).not.toContain(flow.codeVerifier);

      expect(await store.fundingFlows.take(state, "jti-1", 200)).toEqual({ ...flow, createdAt: 100, expiresAt: 1_100 });
      expect(await store.fundingFlows.take(state, "jti-1", 200)).toBeNull(); // single use

      // Another session's take, a late take, and a made-up state get nothing, and burn the flow.
      const stolen = await store.fundingFlows.create(flow, 100, 1_000);
      expect(await store.fundingFlows.take(stolen, "jti-2", 200)).toBeNull();
      expect(await store.fundingFlows.take(stolen, "jti-1", 200)).toBeNull();
      const late = await store.fundingFlows.create(flow, 100, 1_000);
      expect(await store.fundingFlows.take(late, "jti-1", 1_100)).toBeNull();
      expect(await store.fundingFlows.take(`${late}x`, "jti-1", 200)).toBeNull();
      expect(await store.fundingFlows.storedVerifiers()).toEqual([]);
    }));

  test("funding flows: of two takes of one state at once, one gets it; purging deletes expired flows in batches and keeps live ones", () =>
    withStore(async (store) => {
      const app = await newApp(store);
      const flow = { appId: app.id, appUserId: "linker", sessionId: "jti", codeVerifier: "v".repeat(43), monthlyCapNano: 1 };
      const state = await store.fundingFlows.create(flow, 0, 1_000);
      const takes = await Promise.all(Array.from({ length: 8 }, () => store.fundingFlows.take(state, "jti", 10)));
      expect(takes.filter((t) => t !== null)).toHaveLength(1);

      for (let i = 0; i < 5; i++) await store.fundingFlows.create(flow, 0, 1_000);
      const live = await store.fundingFlows.create(flow, 500, 1_000);
      expect(await store.fundingFlows.purgeExpired(999, 100)).toBe(0);
      expect(await store.fundingFlows.purgeExpired(1_000, 2)).toBe(2);
      expect(await store.fundingFlows.purgeExpired(1_000, 100)).toBe(3);
      expect(await store.fundingFlows.take(live, "jti", 1_000)).toMatchObject({ expiresAt: 1_500 });
    }));

  test("a flow's verifier re-sealed under another key still opens; one that does not open can be forgotten", () =>
    withStore(async (store) => {
      const app = await newApp(store);
      const flow = { appId: app.id, appUserId: "linker", sessionId: "jti", codeVerifier: "w".repeat(43), monthlyCapNano: 1 };
      const state = await store.fundingFlows.create(flow, 0, 1_000);
      const { stateHash, stored } = (await store.fundingFlows.storedVerifiers())[0]!;
      const resealed = store.secrets.seal(flow.codeVerifier, sealedContext.fundingFlowVerifier(stateHash));
      expect(await store.fundingFlows.replaceStoredVerifier(stateHash, "not it", resealed)).toBe(false);
      expect(await store.fundingFlows.replaceStoredVerifier(stateHash, stored, resealed)).toBe(true);
      expect(await store.fundingFlows.take(state, "jti", 10)).toMatchObject({ codeVerifier: flow.codeVerifier });

      const lost = await store.fundingFlows.create(flow, 0, 1_000);
      const lostHash = fundingStateHash(lost);
      const unreadable = SecretBox.random().seal(flow.codeVerifier, sealedContext.fundingFlowVerifier(lostHash));
      const current = (await store.fundingFlows.storedVerifiers())[0]!.stored;
      await store.fundingFlows.replaceStoredVerifier(lostHash, current, unreadable);
      expect(await store.fundingFlows.forget(lostHash, "not it")).toBe(false);
      expect(await store.fundingFlows.forget(lostHash, unreadable)).toBe(true);
      expect(await store.fundingFlows.take(lost, "jti", 10)).toBeNull();
    }));
});
