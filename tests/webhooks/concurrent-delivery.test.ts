/**
 * Deliveries to one endpoint do not wait for another's (ARCHITECTURE.md §6 "Delivery"): a
 * receiver that never answers holds its own sends open, and only its own. Each endpoint has
 * at most four sends in flight; the rest of its deliveries stay due and unleased, while
 * every claimed one is leased for longer than its attempt can take. stop() waits for the
 * sends in flight. The hanging receiver is a server in this process that answers when told
 * to; the other is the verifying receiver in its own process.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock";
import { memoryLogger } from "../../src/logger";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite";
import { WebhookDispatcher } from "../../src/webhooks/dispatcher";
import { pollUntil } from "../helpers/cluster";
import { startReceiver, type ReceiverProcess } from "../helpers/webhook-receiver-process";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

const T0 = Date.UTC(2026, 0, 15);
/** Far longer than a test may wait (POLL_BOUND_MS): a send that waits for the hanging one cannot pass. */
const TIMEOUT_MS = 60_000;

/** A receiver that takes each request and answers none of them until released. */
function hangingReceiver() {
  const open: Array<(response: Response) => void> = [];
  let received = 0;
  // idleTimeout 0: Bun would otherwise close the quiet connection after 10 s.
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    fetch: () => {
      received++;
      return new Promise<Response>((resolve) => open.push(resolve));
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/hooks`,
    received: () => received,
    open: () => open.length,
    release: () => open.splice(0).forEach((answer) => answer(new Response(null, { status: 204 }))),
    stop: () => server.stop(true),
  };
}

let receiver: ReceiverProcess;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.stop();
});

let store: SqliteStore;
let clock: ManualClock;
let hanging: ReturnType<typeof hangingReceiver>;
let dispatcher: WebhookDispatcher;

beforeEach(() => {
  store = openSqliteStore(":memory:");
  clock = new ManualClock(T0);
  hanging = hangingReceiver();
  // The receivers are on this machine: allowed only with allowPrivateAddresses (WEBHOOK_ALLOW_PRIVATE_ADDRESSES).
  dispatcher = new WebhookDispatcher(store.webhooks, clock, memoryLogger(), {
    pollMs: 10,
    retryScheduleMs: [5_000],
    timeoutMs: TIMEOUT_MS,
    allowPrivateAddresses: true,
  });
});
afterEach(async () => {
  hanging.release();
  await dispatcher.stop();
  hanging.stop();
});

async function appWithEndpoints(name: string, urls: string[]) {
  const appId = (await createAppWithKey(store.apps, name, [], T0)).app.id;
  const endpoints = [];
  for (const url of urls) endpoints.push(await store.webhooks.createEndpoint(appId, url, null, T0));
  return { appId, endpoints };
}

const deliveriesTo = async (appId: string, endpointId: string) => (await store.webhooks.listDeliveries(appId, 100, endpointId)).reverse();

describe("concurrent webhook delivery", () => {
  test("another app's event is delivered while a receiver that never answers holds its send open", async () => {
    const a = await appWithEndpoints("a", [hanging.url]);
    const b = await appWithEndpoints("b", [receiver.url]);
    await receiver.control({ secret: b.endpoints[0]!.secret, fail: 0 });
    const seen = (await receiver.received()).length;
    dispatcher.start();

    await store.connections.approve(a.appId, "alice", 1e9, T0);
    await pollUntil("A's send to reach its receiver", async () => (hanging.open() === 1 ? true : undefined));
    // B's event is recorded after A's send began, so it needs a later round than A's.
    await store.connections.approve(b.appId, "bob", 1e9, T0);
    const [delivered] = await pollUntil("B's delivery to be recorded", async () => {
      const listed = await deliveriesTo(b.appId, b.endpoints[0]!.id);
      return listed[0]?.state === "delivered" ? listed : undefined;
    });
    expect(delivered).toMatchObject({ state: "delivered", attempts: 1, lastStatus: 204 });
    expect((await receiver.received()).slice(seen)).toMatchObject([{ verified: true, status: 204, event: { data: { userId: "bob" } } }]);

    // A's send is still open: unanswered, its outcome not recorded, still counted in flight.
    expect(hanging.open()).toBe(1);
    expect(await deliveriesTo(a.appId, a.endpoints[0]!.id)).toMatchObject([{ state: "pending", attempts: 0 }]);
    expect(dispatcher.inFlight.get(a.endpoints[0]!.id)).toBe(1);
  });

  test("an endpoint has at most four sends in flight; its other deliveries stay due, unleased, and wait", async () => {
    // Both endpoints of one app get every event: six to the hanging one, six to the answering one.
    const app = await appWithEndpoints("a", [hanging.url, receiver.url]);
    const [stuck, healthy] = app.endpoints as [(typeof app.endpoints)[0], (typeof app.endpoints)[0]];
    await receiver.control({ secret: healthy.secret, fail: 0 });
    for (let i = 0; i < 6; i++) await store.connections.approve(app.appId, `user${i}`, 1e9, T0);
    dispatcher.start();

    // Six deliveries at four at a time take more than one claim: rounds went on while the hanging endpoint was full.
    await pollUntil("the answering endpoint's six deliveries", async () =>
      (await deliveriesTo(app.appId, healthy.id)).every((d) => d.state === "delivered") ? true : undefined,
    );
    expect(hanging.received()).toBe(4);
    expect(hanging.open()).toBe(4);
    const held = await deliveriesTo(app.appId, stuck.id);
    const leased = held.filter((d) => d.nextAttemptAt !== T0);
    const waiting = held.filter((d) => d.nextAttemptAt === T0);
    expect(leased).toHaveLength(4);
    // The lease outlives the attempt, so no other instance takes a delivery while its send is open.
    for (const d of leased) expect(d.nextAttemptAt!).toBeGreaterThan(T0 + TIMEOUT_MS);
    expect(waiting).toMatchObject([
      { state: "pending", attempts: 0 },
      { state: "pending", attempts: 0 },
    ]);

    // stop() returns only once the sends in flight have finished and their outcomes are recorded.
    const stopped = dispatcher.stop();
    hanging.release();
    await stopped;
    const states = (await deliveriesTo(app.appId, stuck.id)).map((d) => d.state).sort();
    expect(states).toEqual(["delivered", "delivered", "delivered", "delivered", "pending", "pending"]);
    expect(dispatcher.inFlight.size).toBe(0);
  });
});
