/**
 * No tenant stalls another (issue 56): an endpoint whose signing secret does not open with
 * this process's secrets keys (sealed under a key it does not hold) fails its own
 * deliveries, as the class `secret_unreadable`, retried on the schedule; every other app's
 * deliveries go out in the same round. The operator sees it in the endpoint listing
 * (`secretState`) and the dispatcher's counts (`/metrics`). Both engines, a real receiver.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock";
import { memoryLogger } from "../../src/logger";
import { SecretBox, sealedContext } from "../../src/secrets/secret-box";
import type { Store } from "../../src/store";
import { OperatorService } from "../../src/services/operator";
import { createAppWithKey } from "../../src/services/operator/secret-keys";
import { WebhookDispatcher } from "../../src/webhooks/dispatcher";
import { storeEngines, withStore } from "../helpers/store-engines";
import { startReceiver, type ReceiverProcess } from "../helpers/webhook-receiver-process";

let receiver: ReceiverProcess;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.stop();
});

const T0 = Date.UTC(2026, 0, 15);
const engines = storeEngines();

/** Re-seals the endpoint's secret under a key this store's ring does not hold. */
async function sealAway(store: Store, endpointId: string, secret: string): Promise<void> {
  const [stored] = (await store.webhooks.storedSecrets()).filter((s) => s.endpointId === endpointId);
  const foreign = SecretBox.random().seal(secret, sealedContext.webhookEndpoint(endpointId));
  expect(await store.webhooks.replaceStoredSecret(endpointId, stored!.stored, foreign)).toBe(true);
}

describe.each(engines)("an endpoint secret that does not open, on %s", (_engine, open) => {
  test("fails its own deliveries as secret_unreadable, listed and counted; the other app's are delivered in the same round", () =>
    withStore(open, async (store) => {
      const clock = new ManualClock(T0);
      const logger = memoryLogger();
      const dispatcher = new WebhookDispatcher(store.webhooks, clock, logger, {
        pollMs: 60_000,
        retryScheduleMs: [5_000],
        timeoutMs: 3000,
        allowPrivateAddresses: true,
      });
      const broken = (await createAppWithKey(store.apps, "broken", [], T0)).app.id;
      const healthy = (await createAppWithKey(store.apps, "healthy", [], T0)).app.id;
      const away = await store.webhooks.createEndpoint(broken, `${receiver.url}?app=broken`, null, T0);
      const fine = await store.webhooks.createEndpoint(healthy, receiver.url, null, T0);
      await receiver.control({ secret: fine.secret, fail: 0 });
      const seen = (await receiver.received()).length;
      await sealAway(store, away.id, away.secret);
      // The broken app's events first, so they lead every claim.
      for (let i = 0; i < 3; i++) await store.webhooks.record({ appId: broken, type: "connection.revoked", data: { i } }, T0);
      await store.webhooks.record({ appId: healthy, type: "connection.revoked", data: {} }, T0);

      await dispatcher.runRound();
      const received = (await receiver.received()).slice(seen);
      expect(received.map((r) => [r.status, r.verified])).toEqual([[204, true]]);
      expect(await store.webhooks.listDeliveries(healthy, 10)).toMatchObject([{ state: "delivered" }]);
      const failed = await store.webhooks.listDeliveries(broken, 10);
      expect(failed.map((d) => [d.state, d.attempts, d.lastError, d.lastStatus, d.nextAttemptAt])).toEqual(
        Array.from({ length: 3 }, () => ["pending", 1, "secret_unreadable", null, T0 + 5_000]),
      );
      expect(dispatcher.stats).toMatchObject({ delivered: 1, secretUnreadable: 3, failedAttempts: 3 });
      // Logged once for the endpoint, not once per delivery.
      expect(logger.lines.filter((l) => l.includes("signing secret does not open"))).toHaveLength(1);
      expect(logger.lines.join("\n")).not.toContain(away.secret);

      const operator = new OperatorService(store, clock);
      expect((await operator.webhooks.list(broken)).map((e) => e.secretState)).toEqual(["unreadable"]);
      expect((await operator.webhooks.list(healthy)).map((e) => e.secretState)).toEqual(["readable"]);
      expect((await operator.webhooks.deliveries(broken, 10)).map((d) => d.lastError)).toEqual(Array(3).fill("secret_unreadable"));

      // After the schedule's last retry it has failed for good; still nothing was sent for it.
      clock.advance(5_000);
      await dispatcher.runRound();
      expect((await store.webhooks.listDeliveries(broken, 10)).map((d) => [d.state, d.attempts])).toEqual(Array(3).fill(["failed", 2]));
      expect((await receiver.received()).length - seen).toBe(1);
      expect(dispatcher.stats.gaveUp).toBe(3);
    }));
});
