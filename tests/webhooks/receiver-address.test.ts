/**
 * Where webhooks may go (ARCHITECTURE.md §6 "Receivers"): a receiver's host is resolved at
 * each delivery and refused (`address_refused`) when it is not public, unless private
 * addresses are allowed (WEBHOOK_ALLOW_PRIVATE_ADDRESSES); the request goes to the address
 * that was checked, under the receiver's own name (Host, TLS server name); failures are
 * stored as classes, never as the system's words. And registration refuses hosts that are
 * non-public addresses or localhost names, unless private addresses are allowed.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock";
import { memoryLogger } from "../../src/logger";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite";
import { WebhookDispatcher, type SendWebhook } from "../../src/webhooks/dispatcher";
import { startReceiver, type ReceiverProcess } from "../helpers/webhook-receiver-process";
import { makeAdminTestApp } from "../helpers/admin";
import { expectError, expectOk } from "../helpers/expect";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

const T0 = Date.UTC(2026, 0, 15);

let receiver: ReceiverProcess;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.stop();
});

let store: SqliteStore;
let clock: ManualClock;
let appId: string;
/** Every URL the dispatcher asked fetch for. */
let requested: string[];

const recordingFetch: SendWebhook = (url, init) => {
  requested.push(url);
  return fetch(url, init);
};
const dispatcher = (allowPrivateAddresses: boolean, send: SendWebhook = recordingFetch) =>
  new WebhookDispatcher(store.webhooks, clock, memoryLogger(), { pollMs: 1000, retryScheduleMs: [5_000], timeoutMs: 3000, allowPrivateAddresses }, send);

/** Registers `url` straight in the store (as an endpoint registered while private addresses were allowed) and records one event. */
async function endpointWithEvent(url: string) {
  const endpoint = await store.webhooks.createEndpoint(appId, url, null, T0);
  await store.connections.approve(appId, `user-${endpoint.id}`, 1e9, T0);
  return endpoint;
}
const deliveryTo = async (endpointId: string) => (await store.webhooks.listDeliveries(appId, 10, endpointId))[0];

beforeEach(async () => {
  store = openSqliteStore(":memory:");
  clock = new ManualClock(T0);
  appId = (await createAppWithKey(store.apps, "hooks", [], T0)).app.id;
  requested = [];
});

describe("receiver addresses at delivery", () => {
  test("a name that resolves to 127.0.0.1 (localhost) is refused unless private addresses are allowed, then delivered", async () => {
    const endpoint = await endpointWithEvent(`http://localhost:${receiver.port}/hooks`);
    await receiver.control({ secret: endpoint.secret, fail: 0 });
    const seen = (await receiver.received()).length;

    await dispatcher(false).runRound();
    expect(await deliveryTo(endpoint.id)).toMatchObject({ state: "pending", attempts: 1, lastStatus: null, lastError: "address_refused" });
    expect(requested).toEqual([]);

    clock.advance(5_000);
    await dispatcher(true).runRound();
    expect(await deliveryTo(endpoint.id)).toMatchObject({ state: "delivered", attempts: 2, lastStatus: 204, lastError: null });
    // Sent to the address that was checked, under the receiver's name (the Host header).
    expect(requested).toEqual([`http://127.0.0.1:${receiver.port}/hooks`]);
    expect((await receiver.received()).slice(seen)).toMatchObject([{ verified: true, status: 204 }]);
  });

  test("literal private, loopback and metadata addresses are refused without a connection", async () => {
    const endpoints = [];
    for (const url of [receiver.url, "https://169.254.169.254/latest", "https://10.0.0.1/", "https://[::ffff:a9fe:a9fe]/", "http://[::1]:9/"]) {
      endpoints.push(await endpointWithEvent(url));
    }
    await dispatcher(false).runRound();
    for (const endpoint of endpoints) expect(await deliveryTo(endpoint.id)).toMatchObject({ attempts: 1, lastStatus: null, lastError: "address_refused" });
    expect(requested).toEqual([]);
  });

  test("a port that refuses the connection is `unreachable`, not the system's message", async () => {
    const closed = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(null) });
    const port = closed.port;
    closed.stop(true);
    const endpoint = await endpointWithEvent(`http://127.0.0.1:${port}/hooks`);
    await dispatcher(true).runRound();
    expect(await deliveryTo(endpoint.id)).toMatchObject({ state: "pending", attempts: 1, lastStatus: null, lastError: "unreachable" });
    // Stored so, not only listed so.
    expect(store.db.query("SELECT last_error FROM webhook_deliveries WHERE endpoint_id = ?").all(endpoint.id)).toEqual([{ last_error: "unreachable" }]);
  });

  test("https goes to the checked address, with the receiver's name for Host, SNI and the certificate check", async () => {
    // A certificate for `localhost` only (no IP address in it): it verifies only under the name.
    const [cert, key] = await Promise.all([Bun.file("tests/fixtures/localhost-tls-cert.pem").text(), Bun.file("tests/fixtures/localhost-tls-key.pem").text()]);
    const hosts: Array<string | null> = [];
    const tlsReceiver = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      tls: { cert, key },
      fetch: (request) => {
        hosts.push(request.headers.get("host"));
        return new Response(null, { status: 204 });
      },
    });
    try {
      const endpoint = await endpointWithEvent(`https://localhost:${tlsReceiver.port}/hooks`);
      // The test's own certificate authority beside the system's; everything else as the dispatcher asked.
      const trustingTestCa: SendWebhook = (url, init) => recordingFetch(url, { ...init, tls: { ...init.tls, ca: cert } as typeof init.tls });
      await dispatcher(true, trustingTestCa).runRound();
      expect(await deliveryTo(endpoint.id)).toMatchObject({ state: "delivered", lastStatus: 204 });
      expect(requested).toEqual([`https://127.0.0.1:${tlsReceiver.port}/hooks`]);
      expect(hosts).toEqual([`localhost:${tlsReceiver.port}`]);
    } finally {
      tlsReceiver.stop(true);
    }
  });
});

describe("receiver addresses at registration", () => {
  const register = async (t: ReturnType<typeof makeAdminTestApp>, url: string) => {
    const { appId: id } = await t.createClientApp();
    return t.admin(`/apps/${id}/webhooks`, { json: { url } });
  };

  test("without WEBHOOK_ALLOW_PRIVATE_ADDRESSES: non-public addresses and localhost are 400, public names are taken", async () => {
    const t = makeAdminTestApp();
    for (const url of [
      "https://169.254.169.254/",
      "https://10.0.0.1/",
      "https://localhost/",
      "https://api.localhost/",
      "https://127.0.0.1:8443/",
      "https://[::1]/",
      "https://[::ffff:169.254.169.254]/",
      "https://[fd00::1]/",
      "https://100.64.0.1/",
      "https://0/",
      "http://localhost:3000/hooks",
      "http://127.0.0.1:3000/hooks",
    ]) {
      await expectError(await register(t, url), 400, "invalid_request", /url /);
    }
    await expectError(await register(t, "http://hooks.example/"), 400, "invalid_request", /must be https/);
    await expectOk(await register(t, "https://hooks.example/in"), 201);
    await expectOk(await register(t, "https://93.184.216.34/in"), 201);
  });

  test("with WEBHOOK_ALLOW_PRIVATE_ADDRESSES=true: private hosts are taken, http still only to this machine", async () => {
    const t = makeAdminTestApp({ env: { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true" } });
    for (const url of ["https://localhost/", "https://10.0.0.1/", "http://localhost:3000/hooks", "http://127.0.0.1:3000/hooks", "http://[::1]:3000/hooks"]) {
      await expectOk(await register(t, url), 201);
    }
    await expectError(await register(t, "http://10.0.0.1/hooks"), 400, "invalid_request", /must be https/);
    await expectError(await register(t, "http://hooks.example/"), 400, "invalid_request", /must be https/);
  });
});
