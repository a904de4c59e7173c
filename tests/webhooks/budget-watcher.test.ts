/**
 * The budget watcher on its own: a check that fails is retried at the next poll, and what
 * the failed check knew is not lost by a newer touch of the same account.
 */
import { expect, test } from "bun:test";
import { BudgetWatcher } from "../../src/webhooks/budget-watcher";
import { InMemoryBudgetLedger } from "../../src/metering/budget-ledger";
import { userAccount } from "../../src/metering/accounts";
import { memoryLogger } from "../../src/logger";
import { ManualClock } from "../../src/clock";
import { periodAt } from "../../src/money";
import { openSqliteStore } from "../../src/store/sqlite";
import type { BudgetTarget } from "../../src/services/budget-target";

test("a refusal noted before a failed check still reports 100 % used up when a plain touch came during that check", async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 15, 12));
  const store = openSqliteStore(":memory:");
  const { app } = await store.apps.create("watched", ["https://w.example"], clock.now());
  await store.webhooks.createEndpoint(app.id, "https://w.example/hook", ["budget.threshold"], clock.now());
  const period = periodAt(clock.now());
  const account = userAccount(app.id, period.id, "alice");
  // 85 % spent: 80 % is reached; 100 % only because a call was refused (the last calls shrink to what is left).
  const budget = new InMemoryBudgetLedger(async () => 850);
  const watcher = new BudgetWatcher(store, budget, clock, memoryLogger());
  const target: BudgetTarget = {
    account,
    capNano: 1_000,
    appId: app.id,
    appUserId: "alice",
    grantId: null,
    period,
    resetsAt: period.end,
    markFundingInvalid: async () => {},
  };

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

  const thresholds = store.db
    .query<{ payload: string }, []>("SELECT payload FROM webhook_events")
    .all()
    .map((r) => JSON.parse(r.payload).data.threshold as number);
  expect(thresholds.sort((a, b) => a - b)).toEqual([80, 100]);
});
