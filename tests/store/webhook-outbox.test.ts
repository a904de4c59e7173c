/**
 * The webhook outbox on both engines (in-memory SQLite, a real PostgreSQL server): fan-out
 * to subscribed endpoints, events recorded with the connection change that causes them,
 * dedup keys under concurrency, leases, and claims by several instances at once.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Store } from "../../src/store";
import type { DeliveryFailure } from "../../src/store/webhooks";
import { openSqliteStore } from "../../src/store/sqlite";
import { openPostgresStore } from "../../src/store/postgres";
import { startPostgres, type TestPostgres } from "../helpers/postgres";
import { createAppWithKey } from "../../src/services/operator/secret-keys";
import { SecretBox, sealedContext } from "../../src/secrets/secret-box";

let pg: TestPostgres;
beforeAll(async () => {
  pg = await startPostgres();
});
afterAll(async () => {
  await pg?.destroy();
});

const T0 = Date.UTC(2026, 0, 15);

/** Each case gets its own database; `open()` opens another store (another instance) on it. */
const engines: Array<[string, () => Promise<{ store: Store; open?: () => Promise<Store> }>]> = [
  ["sqlite", async () => ({ store: openSqliteStore(":memory:") })],
  [
    "postgres",
    async () => {
      const url = await pg.createDatabase();
      return { store: await openPostgresStore(url, { poolSize: 4 }), open: () => openPostgresStore(url, { poolSize: 4 }) };
    },
  ],
];

describe.each(engines)("webhook outbox on %s", (engine, make) => {
  async function withStore(work: (store: Store, open?: () => Promise<Store>) => Promise<void>): Promise<void> {
    const { store, open } = await make();
    try {
      await work(store, open);
    } finally {
      await store.close();
    }
  }

  test("endpoints: created with a whsec_ secret, listed, disabled, enabled, deleted; scoped by app", () =>
    withStore(async (store) => {
      const { app } = await createAppWithKey(store.apps, "a", [], T0);
      const { app: other } = await createAppWithKey(store.apps, "b", [], T0);
      const e = await store.webhooks.createEndpoint(app.id, "https://hooks.example/x", ["connection.revoked"], T0);
      expect(e.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      expect(e).toMatchObject({ appId: app.id, url: "https://hooks.example/x", eventTypes: ["connection.revoked"], disabledAt: null });
      expect((await store.webhooks.listEndpoints(app.id)).map((x) => x.id)).toEqual([e.id]);
      expect(await store.webhooks.listEndpoints(other.id)).toEqual([]);
      await store.webhooks.disableEndpoint(e.id, "operator", T0 + 1);
      expect((await store.webhooks.listEndpoints(app.id))[0]).toMatchObject({ disabledAt: T0 + 1, disabledReason: "operator" });
      expect(await store.webhooks.enableEndpoint(other.id, e.id)).toBeNull();
      expect(await store.webhooks.enableEndpoint(app.id, e.id)).toMatchObject({ disabledAt: null, disabledReason: null });
      expect(await store.webhooks.deleteEndpoint(other.id, e.id)).toBe(false);
      expect(await store.webhooks.deleteEndpoint(app.id, e.id)).toBe(true);
      expect(await store.webhooks.listEndpoints(app.id)).toEqual([]);
    }));

  test("connection changes record their events in the same transaction; no-op changes record none", () =>
    withStore(async (store) => {
      const { app } = await createAppWithKey(store.apps, "a", [], T0);
      // Without an endpoint nothing is recorded at all.
      await store.connections.approve(app.id, "u0", 1e9, T0);
      await store.webhooks.createEndpoint(app.id, "https://hooks.example/x", null, T0);
      await store.connections.approve(app.id, "u1", 1e9, T0);
      await store.connections.approve(app.id, "u1", 2e9, T0 + 1);
      await store.connections.markFundingInvalid(app.id, "u1", T0 + 2);
      await store.connections.markFundingInvalid(app.id, "u1", T0 + 3);
      await store.connections.approve(app.id, "u1", 2e9, T0 + 4);
      await store.connections.revoke(app.id, "u1", T0 + 5);
      await store.connections.revoke(app.id, "u1", T0 + 6);
      await store.connections.approve(app.id, "u1", 1e9, T0 + 7);
      const recorded = (await store.webhooks.listDeliveries(app.id, 100)).reverse();
      expect(recorded.map((d) => d.type)).toEqual([
        "connection.approved",
        "connection.updated",
        "funding.invalid",
        "connection.updated",
        "connection.revoked",
        "connection.approved",
      ]);
      expect(recorded.every((d) => d.state === "pending" && d.attempts === 0)).toBe(true);
    }));

  test("a dedup key is recorded once, even by many instances at the same moment", () =>
    withStore(async (store, open) => {
      const { app } = await createAppWithKey(store.apps, "a", [], T0);
      await store.webhooks.createEndpoint(app.id, "https://hooks.example/1", null, T0);
      await store.webhooks.createEndpoint(app.id, "https://hooks.example/2", ["budget.threshold"], T0);
      await store.webhooks.createEndpoint(app.id, "https://hooks.example/3", ["connection.revoked"], T0);
      const others = open ? await Promise.all([open(), open()]) : [];
      try {
        const stores = [store, ...others];
        const draft = { appId: app.id, type: "budget.threshold" as const, data: { threshold: 80 }, dedupKey: "budget.threshold:acct:80" };
        const ids = await Promise.all(Array.from({ length: 12 }, (_, i) => stores[i % stores.length]!.webhooks.record(draft, T0)));
        expect(ids.filter((id) => id !== null)).toHaveLength(1);
        // Fanned out to the two endpoints that want it, not the third.
        expect(await store.webhooks.listDeliveries(app.id, 10)).toHaveLength(2);
      } finally {
        await Promise.all(others.map((s) => s.close()));
      }
    }));

  test("claims lease deliveries; instances claiming together never take the same one", () =>
    withStore(async (store, open) => {
      const { app } = await createAppWithKey(store.apps, "a", [], T0);
      await store.webhooks.createEndpoint(app.id, "https://hooks.example/1", null, T0);
      for (let i = 0; i < 40; i++) await store.webhooks.record({ appId: app.id, type: "connection.revoked", data: { i } }, T0);
      const others = open ? await Promise.all([open(), open()]) : [];
      try {
        const stores = [store, ...others];
        const claims = await Promise.all(stores.flatMap((s) => [s, s]).map((s) => s.webhooks.claimDue(T0, 8, 30_000)));
        const ids = claims.flat().map((d) => d.eventId);
        expect(new Set(ids).size).toBe(ids.length);
        expect(ids.length).toBe(Math.min(40, stores.length * 2 * 8));
        // Leased: not due again until the lease ends, then due again (the claimer died).
        expect(await store.webhooks.claimDue(T0 + 29_999, 100, 30_000)).toHaveLength(40 - ids.length);
        expect(await store.webhooks.claimDue(T0 + 30_000, 100, 30_000)).toHaveLength(ids.length);
      } finally {
        await Promise.all(others.map((s) => s.close()));
      }
    }));

  test("a claim lets endpoints take turns: one endpoint's older backlog does not fill it", () =>
    withStore(async (store) => {
      const { app } = await createAppWithKey(store.apps, "a", [], T0);
      const early = await store.webhooks.createEndpoint(app.id, "https://hooks.example/early", ["connection.revoked"], T0);
      const late = await store.webhooks.createEndpoint(app.id, "https://hooks.example/late", ["budget.threshold"], T0);
      for (let i = 0; i < 3; i++) await store.webhooks.record({ appId: app.id, type: "connection.revoked", data: { i } }, T0 + i);
      await store.webhooks.record({ appId: app.id, type: "budget.threshold", data: {} }, T0 + 5);
      const claimed = await store.webhooks.claimDue(T0 + 10, 2, 30_000, { perEndpoint: 4, sending: new Map() });
      expect(claimed.map((d) => d.endpointId).sort()).toEqual([early.id, late.id].sort());
    }));

  test("a bounded claim skips endpoints at their bound and gives the others their room", () =>
    withStore(async (store, open) => {
      const { app } = await createAppWithKey(store.apps, "a", [], T0);
      const full = await store.webhooks.createEndpoint(app.id, "https://hooks.example/full", null, T0);
      const busy = await store.webhooks.createEndpoint(app.id, "https://hooks.example/busy", null, T0);
      const idle = await store.webhooks.createEndpoint(app.id, "https://hooks.example/idle", null, T0);
      // Six events, each fanned out to the three endpoints.
      for (let i = 0; i < 6; i++) await store.webhooks.record({ appId: app.id, type: "connection.revoked", data: { i } }, T0 + i);
      const countBy = (claimed: Array<{ endpointId: string }>) => [full.id, busy.id, idle.id].map((id) => claimed.filter((d) => d.endpointId === id).length);
      const sending = new Map([
        [full.id, 4],
        [busy.id, 1],
      ]);

      const first = await store.webhooks.claimDue(T0 + 10, 2, 30_000, { perEndpoint: 4, sending });
      expect(countBy(first)).toEqual([0, 1, 1]);
      expect(first.every((d) => d.payload.includes('"i":0'))).toBe(true);
      sending.set(busy.id, 2).set(idle.id, 1);
      const rest = await store.webhooks.claimDue(T0 + 10, 100, 30_000, { perEndpoint: 4, sending });
      expect(countBy(rest)).toEqual([0, 2, 3]);
      // The full endpoint's deliveries were not leased: still due for a claimer with room.
      const other = open ? await open() : store;
      try {
        expect(countBy(await other.webhooks.claimDue(T0 + 10, 100, 30_000, { perEndpoint: 4, sending: new Map() }))).toEqual([4, 3, 2]);
      } finally {
        if (other !== store) await other.close();
      }
    }));

  test("a claim with an endpoint secret that does not open hands that delivery over without a secret, and the others whole", () =>
    withStore(async (store) => {
      const { app } = await createAppWithKey(store.apps, "a", [], T0);
      const { app: other } = await createAppWithKey(store.apps, "b", [], T0);
      const sealedAway = await store.webhooks.createEndpoint(app.id, "https://hooks.example/away", null, T0);
      const healthy = await store.webhooks.createEndpoint(other.id, "https://hooks.example/ok", null, T0);
      // As a server holding only the old key finds it after `keys rotate-kek`: sealed under a key it does not have.
      const [stored] = (await store.webhooks.storedSecrets()).filter((s) => s.endpointId === sealedAway.id);
      const foreign = SecretBox.random().seal(sealedAway.secret, sealedContext.webhookEndpoint(sealedAway.id));
      expect(await store.webhooks.replaceStoredSecret(sealedAway.id, stored!.stored, foreign)).toBe(true);
      await store.webhooks.record({ appId: app.id, type: "connection.revoked", data: {} }, T0);
      await store.webhooks.record({ appId: other.id, type: "connection.revoked", data: {} }, T0);

      const claimed = await store.webhooks.claimDue(T0, 10, 30_000);
      const byEndpoint = new Map(claimed.map((d) => [d.endpointId, d]));
      expect(claimed).toHaveLength(2);
      expect(byEndpoint.get(sealedAway.id)!.secret).toBeNull();
      expect(byEndpoint.get(healthy.id)!.secret).toBe(healthy.secret);
      // Its failure is stored and listed as its class.
      const away = byEndpoint.get(sealedAway.id)!;
      await store.webhooks.markAttemptFailed(away.eventId, away.endpointId, 1, T0 + 5000, null, "secret_unreadable", T0);
      expect((await store.webhooks.listDeliveries(app.id, 10))[0]).toMatchObject({ state: "pending", lastError: "secret_unreadable" });
    }));

  test("errors stored as raw text (before they were classes) are listed as classes", () =>
    withStore(async (store) => {
      const { app } = await createAppWithKey(store.apps, "a", [], T0);
      const e = await store.webhooks.createEndpoint(app.id, "https://hooks.example/1", null, T0);
      const legacy: Record<string, DeliveryFailure> = {
        "no answer within 10000 ms": "timeout",
        "Unable to connect. Is the computer able to access the url?": "unreachable",
        "HTTP 503": "HTTP 503",
      };
      for (const [i, stored] of Object.keys(legacy).entries()) {
        const id = (await store.webhooks.record({ appId: app.id, type: "connection.revoked", data: { i } }, T0 + i))!;
        // What the earlier dispatcher wrote: the error's own message.
        await store.webhooks.markAttemptFailed(id, e.id, 1, T0 + 5000, null, stored as DeliveryFailure, T0 + i);
      }
      const listed = (await store.webhooks.listDeliveries(app.id, 10)).reverse();
      expect(listed.map((d) => d.lastError)).toEqual(Object.values(legacy));
    }));

  test(`attempt outcomes, the deliveries listing, and the purge of finished events (${engine})`, () =>
    withStore(async (store) => {
      const { app } = await createAppWithKey(store.apps, "a", [], T0);
      const e = await store.webhooks.createEndpoint(app.id, "https://hooks.example/1", null, T0);
      const first = (await store.webhooks.record({ appId: app.id, type: "connection.revoked", data: {} }, T0))!;
      const second = (await store.webhooks.record({ appId: app.id, type: "connection.revoked", data: {} }, T0 + 1))!;
      await store.webhooks.markAttemptFailed(first, e.id, 1, T0 + 5000, 500, "HTTP 500", T0);
      await store.webhooks.markAttemptFailed(second, e.id, 1, null, null, "unreachable", T0 + 1);
      expect(await store.webhooks.listDeliveries(app.id, 10, e.id)).toMatchObject([
        { eventId: second, state: "failed", attempts: 1, lastStatus: null, lastError: "unreachable", nextAttemptAt: null, finishedAt: T0 + 1 },
        { eventId: first, state: "pending", attempts: 1, lastStatus: 500, nextAttemptAt: T0 + 5000, finishedAt: null },
      ]);
      await store.webhooks.markDelivered(first, e.id, 200, T0 + 6000);
      // Only events whose every delivery finished before the cutoff go.
      expect(await store.webhooks.purgeFinished(T0 + 2, 100)).toBe(1);
      expect(await store.webhooks.purgeFinished(T0 + 7000, 100)).toBe(1);
      expect(await store.webhooks.listDeliveries(app.id, 10)).toEqual([]);
    }));
});
