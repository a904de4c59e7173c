/**
 * The dispatcher's delivery rules against a receiver in its own process: retries on the
 * schedule (a manual clock, no waiting), the same webhook-id on every attempt, 410 Gone
 * disables the endpoint, a receiver that never answers times out, the last failure is final,
 * a freed slot is used at once, and a delivery claimed by a process that died is sent again
 * once its lease runs out.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock";
import { memoryLogger } from "../../src/logger";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite";
import { WebhookDispatcher, type DispatcherOptions } from "../../src/webhooks/dispatcher";
import { startReceiver, type ReceiverProcess } from "../helpers/webhook-receiver-process";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

let receiver: ReceiverProcess;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.stop();
});

const T0 = Date.UTC(2026, 0, 15);
let store: SqliteStore;
let clock: ManualClock;
let appId: string;
let endpointId: string;
let seen = 0;

// The receivers are on this machine: allowed only with allowPrivateAddresses (WEBHOOK_ALLOW_PRIVATE_ADDRESSES).
const OPTIONS: DispatcherOptions = { pollMs: 1000, retryScheduleMs: [5_000, 300_000], timeoutMs: 3000, allowPrivateAddresses: true };
const dispatcher = (options: Partial<DispatcherOptions> = {}) => new WebhookDispatcher(store.webhooks, clock, memoryLogger(), { ...OPTIONS, ...options });
const newlyReceived = async () => (await receiver.received()).slice(seen);
const deliveries = () => store.webhooks.listDeliveries(appId, 10);

beforeEach(async () => {
  store = openSqliteStore(":memory:");
  clock = new ManualClock(T0);
  appId = (await createAppWithKey(store.apps, "hooks", [], T0)).app.id;
  const endpoint = await store.webhooks.createEndpoint(appId, receiver.url, null, T0);
  endpointId = endpoint.id;
  await receiver.control({ secret: endpoint.secret, fail: 0, status: 500 });
  seen = (await receiver.received()).length;
  await store.connections.approve(appId, "alice", 1e9, T0);
});

describe("webhook dispatcher", () => {
  test("a failed attempt is retried on the schedule with the same webhook-id, then delivered", async () => {
    await receiver.control({ fail: 1, status: 503 });
    const d = dispatcher();
    await d.runRound();
    expect((await deliveries())[0]).toMatchObject({ state: "pending", attempts: 1, lastStatus: 503, nextAttemptAt: T0 + 5_000 });
    clock.advance(4_999);
    await d.runRound();
    expect(await newlyReceived()).toHaveLength(1);
    clock.advance(1);
    await d.runRound();
    const received = await newlyReceived();
    expect(received.map((r) => r.status)).toEqual([503, 204]);
    expect(received.every((r) => r.verified)).toBe(true);
    expect(received[1]!.webhookId).toBe(received[0]!.webhookId!);
    expect((await deliveries())[0]).toMatchObject({ state: "delivered", attempts: 2, lastStatus: 204, nextAttemptAt: null });
  });

  test("after the schedule's last retry fails, the delivery has failed for good", async () => {
    await receiver.control({ fail: 10, status: 500 });
    const d = dispatcher();
    for (const wait of [0, 5_000, 300_000, 10_000_000]) {
      clock.advance(wait);
      await d.runRound();
    }
    expect(await newlyReceived()).toHaveLength(3);
    expect((await deliveries())[0]).toMatchObject({ state: "failed", attempts: 3, lastStatus: 500, lastError: "HTTP 500" });
    expect(d.stats.gaveUp).toBe(1);
  });

  test("410 Gone disables the endpoint: its other pending deliveries fail and new events skip it", async () => {
    await store.connections.revoke(appId, "alice", T0);
    await receiver.control({ fail: 1, status: 410 });
    await dispatcher({ perEndpointInFlight: 1 }).runRound();
    const [endpoint] = await store.webhooks.listEndpoints(appId);
    expect(endpoint).toMatchObject({ disabledReason: "gone" });
    expect(endpoint!.disabledAt).not.toBeNull();
    // The one answered 410 and the one never sent both end failed.
    expect((await deliveries()).map((d) => d.state)).toEqual(["failed", "failed"]);
    expect(await newlyReceived()).toHaveLength(1);
    expect(await store.webhooks.record({ appId, type: "connection.revoked", data: {} }, T0)).toBeNull();
  });

  test("a receiver that does not answer in time is a failed attempt", async () => {
    const silent = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Promise<Response>(() => {}) });
    try {
      await store.webhooks.createEndpoint(appId, `http://127.0.0.1:${silent.port}/`, null, T0);
      await store.connections.revoke(appId, "alice", T0);
      await dispatcher({ timeoutMs: 200 }).runRound();
      const slow = (await deliveries()).filter((d) => d.endpointId !== endpointId);
      expect(slow[0]).toMatchObject({ state: "pending", attempts: 1, lastError: "timeout" });
    } finally {
      silent.stop(true);
    }
  });

  test("a send that finishes frees its slot for the endpoint's next delivery at once, not at the next poll", async () => {
    await store.connections.revoke(appId, "alice", T0);
    await store.connections.approve(appId, "alice", 1e9, T0);
    // One at a time to the endpoint, and no poll during the test: only finished sends can claim the rest.
    await dispatcher({ perEndpointInFlight: 1, pollMs: 60_000 }).runRound();
    expect(await newlyReceived()).toMatchObject([{ status: 204 }, { status: 204 }, { status: 204 }]);
    expect((await deliveries()).map((d) => d.state)).toEqual(["delivered", "delivered", "delivered"]);
  });

  test("a delivery claimed by a process that died is sent once its lease runs out", async () => {
    // What a process killed mid-send leaves behind: a claim, and no outcome.
    const [claimed] = await store.webhooks.claimDue(T0, 10, 9_000);
    expect(claimed).toBeDefined();
    const d = dispatcher();
    await d.runRound();
    expect(await newlyReceived()).toHaveLength(0);
    clock.advance(9_000);
    await d.runRound();
    const received = await newlyReceived();
    expect(received).toHaveLength(1);
    expect(received[0]).toMatchObject({ webhookId: claimed!.eventId, verified: true, status: 204 });
  });
});
