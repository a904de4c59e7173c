/**
 * The budget watcher on its own, against a ledger whose spend the test sets: why each
 * `budget.threshold` fired (`reason`) and the share of the cap spent (`usedPercent`); a
 * check that fails is retried at the next poll, and what the failed check knew is not lost
 * by a newer touch of the same account.
 */
import { describe, expect, test } from "bun:test";
import { BudgetWatcher } from "../../src/webhooks/budget-watcher";
import { usedPercent } from "../../src/webhooks/threshold-event";
import { InMemoryBudgetLedger } from "../../src/budget/ledger";
import { userAccount } from "../../src/budget/accounts";
import { memoryLogger } from "../../src/logger";
import { ManualClock } from "../../src/clock";
import { periodAt } from "../../src/money";
import { openSqliteStore } from "../../src/store/sqlite";
import type { BudgetTarget } from "../../src/budget/target";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

/** A watcher over one user whose cap and spend (nano-dollars) the test sets, with an endpoint subscribed to thresholds. */
async function watched(capNano: number, spentNano: number) {
  const clock = new ManualClock(Date.UTC(2026, 0, 15, 12));
  const store = openSqliteStore(":memory:");
  const { app } = await createAppWithKey(store.apps, "watched", ["https://w.example"], clock.now());
  await store.webhooks.createEndpoint(app.id, "https://w.example/hook", ["budget.threshold"], clock.now());
  const period = periodAt(clock.now());
  const target: BudgetTarget = {
    account: userAccount(app.id, period.id, "alice"),
    capNano,
    appId: app.id,
    appUserId: "alice",
    grantId: null,
    period,
    resetsAt: period.end,
    payer: "app",
    markFundingInvalid: async () => {},
  };
  const watcher = new BudgetWatcher(store, new InMemoryBudgetLedger(async () => spentNano), clock, memoryLogger());
  /** The thresholds recorded so far, lowest level first. */
  const thresholds = () =>
    store.db
      .query<{ payload: string }, []>("SELECT payload FROM webhook_events")
      .all()
      .map((r) => JSON.parse(r.payload).data as { threshold: number; reason: string; usedPercent: number; usedUsd: number; limitUsd: number })
      .sort((a, b) => a.threshold - b.threshold);
  return { store, target, watcher, thresholds };
}

describe("why a threshold fired", () => {
  test("a call refused at 82.8 % of the cap: 80 % was spent, 100 % was refused, both at 82.8", async () => {
    const { target, watcher, thresholds } = await watched(5_000_000, 4_140_000);
    watcher.note(target, true);
    await watcher.check();
    expect(thresholds()).toEqual([
      expect.objectContaining({ threshold: 80, reason: "spent", usedPercent: 82.8, usedUsd: 0.00414, limitUsd: 0.005 }),
      expect.objectContaining({ threshold: 100, reason: "refused", usedPercent: 82.8, usedUsd: 0.00414, limitUsd: 0.005 }),
    ]);
  });

  test("spend that reaches the cap: both levels spent, at 100", async () => {
    const { target, watcher, thresholds } = await watched(5_000_000, 5_000_000);
    watcher.note(target);
    await watcher.check();
    expect(thresholds().map(({ threshold, reason, usedPercent }) => ({ threshold, reason, usedPercent }))).toEqual([
      { threshold: 80, reason: "spent", usedPercent: 100 },
      { threshold: 100, reason: "spent", usedPercent: 100 },
    ]);
  });

  test("spend past 80 % without a refusal: only 80 %, spent", async () => {
    const { target, watcher, thresholds } = await watched(1_000, 999);
    watcher.note(target);
    await watcher.check();
    expect(thresholds()).toEqual([expect.objectContaining({ threshold: 80, reason: "spent", usedPercent: 99.9 })]);
  });

  test("a refusal a hair short of the cap reads 99.99, never a rounded-up 100 that looks spent", async () => {
    const { target, watcher, thresholds } = await watched(100_000, 99_996);
    watcher.note(target, true);
    await watcher.check();
    expect(thresholds().find((e) => e.threshold === 100)).toMatchObject({ reason: "refused", usedPercent: 99.99 });
  });
});

describe("usedPercent", () => {
  test("the share of the cap in percent, rounded down to two decimals", () => {
    expect(usedPercent(0, 1_000)).toBe(0);
    expect(usedPercent(828, 1_000)).toBe(82.8);
    expect(usedPercent(1, 3)).toBe(33.33);
    expect(usedPercent(2, 3)).toBe(66.66);
    expect(usedPercent(7_999_999, 10_000_000)).toBe(79.99);
    expect(usedPercent(8_000_000, 10_000_000)).toBe(80);
    expect(usedPercent(1_500, 1_000)).toBe(150);
  });

  test("exact for caps whose spend × 10 000 passes 2^53 (about $900 000 and up)", () => {
    const capNano = 5_000_000 * 1e9;
    expect(capNano * 10_000).toBeGreaterThan(Number.MAX_SAFE_INTEGER);
    expect(usedPercent(capNano - 1, capNano)).toBe(99.99);
    expect(usedPercent(capNano, capNano)).toBe(100);
  });
});

test("a refusal noted before a failed check still reports 100 % used up when a plain touch came during that check", async () => {
  // 85 % spent: 80 % is reached; 100 % only because a call was refused (the last calls shrink to what is left).
  const { store, target, watcher, thresholds } = await watched(1_000, 850);
  const listEndpoints = store.webhooks.listEndpoints.bind(store.webhooks);
  store.webhooks.listEndpoints = async () => {
    // While this check runs, a call that was not refused touches the account again.
    watcher.note(target);
    throw new Error("the store is down");
  };
  watcher.note(target, true);
  await watcher.check(); // fails (logged), to be retried at the next poll
  store.webhooks.listEndpoints = listEndpoints;
  await watcher.check();
  expect(thresholds().map(({ threshold, reason }) => ({ threshold, reason }))).toEqual([
    { threshold: 80, reason: "spent" },
    { threshold: 100, reason: "refused" },
  ]);
});
