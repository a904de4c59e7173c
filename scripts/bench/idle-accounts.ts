/**
 * What the embedded ledger's accounts cost in memory, and what forgetting them costs
 * (src/budget/ledger.ts InMemoryBudgetLedger.forgetIdle), against a real SQLite file with
 * the service's migrations.
 *
 *   taskset -c 1 bun scripts/bench/idle-accounts.ts [--accounts 100000]
 *
 * Writes one ledger row per account through the usage writer (so every account has its
 * totals row, as after a month of calls), loads each account into the ledger from them (as
 * a user's first call of the process does), and measures:
 *   - heapPerAccountBytes: the live heap (after a full collection) added by the loaded
 *     accounts, per account, their keys included;
 *   - sweepUsPerAccount: wall time of the round that forgets them all (two reads of the
 *     totals per account), per account, on the event loop in turns of at most 2 ms;
 *   - longestTurnMs: the longest the sweep held the event loop without a break (a timer
 *     checked every millisecond meanwhile);
 *   - heapAfterForgetBytes: the live heap left, per account, once forgotten.
 * Prints one JSON line.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { flagReader } from "./lib/flags";
import { benchAccount, BENCH_ROW_COST_NANO, benchLedgerRow } from "./lib/ledger-row";
import { openSqliteStore } from "../../src/store/sqlite";
import { UsageWriter } from "../../src/metering/usage-writer";
import { InMemoryBudgetLedger } from "../../src/budget/ledger";
import { memoryLogger } from "../../src/logger";

const flag = flagReader();
const accounts = Number(flag("accounts", "100000"));

const liveHeap = () => {
  Bun.gc(true);
  return process.memoryUsage().heapUsed;
};

const dir = mkdtempSync(join(tmpdir(), "bench-idle-accounts-"));
try {
  const store = openSqliteStore(join(dir, "proxy.sqlite"));
  const writer = new UsageWriter(store.usageLedger, memoryLogger(), 100, 1000);
  const now = Date.now();
  for (let i = 0; i < accounts; i++) writer.enqueue(benchLedgerRow(Bun.randomUUIDv7(), `user-${i}`, i, now));
  await writer.close(600_000);

  const ledger = new InMemoryBudgetLedger(
    (account) => store.usageTotals.spentNano(account),
    (account) => store.usageTotals.frozenCapNano(account),
  );
  const empty = liveHeap();
  // Each key made afresh, as a call makes it: the ledger's map holds the only reference.
  for (let i = 0; i < accounts; i++) await ledger.snapshot(benchAccount(`user-${i}`));
  const loaded = liveHeap();

  // The first round only begins the count; the second finds every account a round idle.
  await ledger.forgetIdle();
  let longestTurnMs = 0;
  let last = performance.now();
  const watch = setInterval(() => {
    const at = performance.now();
    longestTurnMs = Math.max(longestTurnMs, at - last);
    last = at;
  }, 1);
  const started = performance.now();
  const forgotten = await ledger.forgetIdle();
  const sweepMs = performance.now() - started;
  clearInterval(watch);
  const after = liveHeap();
  if (forgotten !== accounts || ledger.accountsInMemory !== 0) throw new Error(`forgot ${forgotten} of ${accounts}`);
  // Loaded again from the totals: the same spend.
  const back = await ledger.snapshot(benchAccount(`user-${accounts - 1}`));
  if (back.spentNano !== BENCH_ROW_COST_NANO) throw new Error(`reloaded spend ${back.spentNano}, expected ${BENCH_ROW_COST_NANO}`);

  console.log(
    JSON.stringify({
      accounts,
      heapPerAccountBytes: Math.round((loaded - empty) / accounts),
      sweepUsPerAccount: Math.round((sweepMs * 1000 * 100) / accounts) / 100,
      longestTurnMs: Math.round(longestTurnMs * 10) / 10,
      heapAfterForgetBytes: Math.round((after - empty) / accounts),
    }),
  );
  await store.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
