/**
 * The periodic purge of consent requests and funding flows: used and expired rows go, in bounded batches per
 * run, live ones stay. A real SQLite store and the fake clock; runs are started by hand (or
 * by start(), whose first run is immediate), never by waiting for the timer.
 */
import { expect, test } from "bun:test";
import { ManualClock } from "../../src/clock";
import { memoryLogger } from "../../src/logger";
import { CONSENT_LIFETIME_MS } from "../../src/services/grant-consent";
import { ConsentRequestSweeper } from "../../src/services/consent-sweeper";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite";
import { approveConsentOrThrow } from "../helpers/grants";
import { T0 } from "../helpers/test-app";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

const SCHEDULE = { everyMs: 60_000, batchSize: 3, maxBatchesPerRun: 2 };

async function storeWithRequests(clock: ManualClock, count: number): Promise<{ store: SqliteStore; appId: string; tokens: string[] }> {
  const store = openSqliteStore(":memory:");
  const { app } = await createAppWithKey(store.apps, "sweep", ["https://s.example"], clock.now());
  const tokens: string[] = [];
  for (let i = 0; i < count; i++) {
    const request = { appId: app.id, usdCapNano: 1, maxUses: null, ttlSeconds: 60, origin: "https://s.example", state: "" };
    tokens.push(await store.grants.createConsentRequest(request, clock.now(), CONSENT_LIFETIME_MS));
  }
  return { store, appId: app.id, tokens };
}

const rowCount = (store: SqliteStore) => (store.db.query("SELECT count(*) AS n FROM consent_requests").get() as { n: number }).n;

test("a run deletes at most batchSize × maxBatchesPerRun rows; the next run goes on; live rows stay", async () => {
  const clock = new ManualClock(T0);
  const { store, appId, tokens } = await storeWithRequests(clock, 8);
  const sweeper = new ConsentRequestSweeper(store, clock, memoryLogger(), SCHEDULE);
  expect(await sweeper.sweep()).toBe(0); // nothing has expired yet

  clock.advance(CONSENT_LIFETIME_MS); // all 8 expire now; a new one is live
  const live = await store.grants.createConsentRequest(
    { appId, usdCapNano: 1, maxUses: null, ttlSeconds: 60, origin: "https://s.example", state: "" },
    clock.now(),
    CONSENT_LIFETIME_MS,
  );
  expect(await sweeper.sweep()).toBe(6);
  expect(await sweeper.sweep()).toBe(2);
  expect(await sweeper.sweep()).toBe(0);
  expect(rowCount(store)).toBe(1);
  for (const token of tokens) expect(await store.grants.consentAppId(token)).toBeNull();

  // A used request goes at the next run, before its expiry.
  await approveConsentOrThrow(store.grants, live, clock.now());
  clock.advance(1);
  expect(await sweeper.sweep()).toBe(1);
  expect(rowCount(store)).toBe(0);
  await store.close();
});

test("start() sweeps at once and stop() waits for that run to finish", async () => {
  const clock = new ManualClock(T0);
  const { store } = await storeWithRequests(clock, 5);
  clock.advance(CONSENT_LIFETIME_MS);
  const sweeper = new ConsentRequestSweeper(store, clock, memoryLogger(), SCHEDULE);
  sweeper.start();
  await sweeper.stop();
  // Two batches (3, then 2) with a yield between them: all done by the time stop() returned.
  expect(rowCount(store)).toBe(0);
  await store.close();
});

test("a failing purge is logged, not thrown, and the next run works", async () => {
  const clock = new ManualClock(T0);
  const logger = memoryLogger();
  const { store } = await storeWithRequests(clock, 2);
  clock.advance(CONSENT_LIFETIME_MS);
  store.db.exec("ALTER TABLE consent_requests RENAME TO consent_requests_away");
  const sweeper = new ConsentRequestSweeper(store, clock, logger, SCHEDULE);
  expect(await sweeper.sweep()).toBe(0);
  expect(logger.lines.join("\n")).toContain("purging used and expired consent requests failed");
  store.db.exec("ALTER TABLE consent_requests_away RENAME TO consent_requests");
  expect(await sweeper.sweep()).toBe(2);
  await store.close();
});

test("expired funding flows go too, with their own batches; a live flow stays and can still be taken", async () => {
  const clock = new ManualClock(T0);
  const { store, appId } = await storeWithRequests(clock, 0);
  const flow = { appId, appUserId: "linker", sessionId: "jti", codeVerifier: "v".repeat(43), monthlyCapNano: 1 };
  for (let i = 0; i < 7; i++) await store.fundingFlows.create(flow, clock.now(), 600_000);
  const live = await store.fundingFlows.create(flow, clock.now() + 1, 600_000);
  clock.advance(600_000);
  const sweeper = new ConsentRequestSweeper(store, clock, memoryLogger(), SCHEDULE);
  expect(await sweeper.sweep()).toBe(6); // two batches of 3
  expect(await sweeper.sweep()).toBe(1);
  expect(await store.fundingFlows.take(live, "jti", clock.now())).toMatchObject({ appUserId: "linker" });
  await store.close();
});
