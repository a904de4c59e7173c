/**
 * Micro-benchmark of src/metering/usage-writer.ts against a real SQLite file (WAL, the
 * service's own migrations and pragmas): how many ledger rows per second it writes.
 *
 *   bun scripts/bench/usage-writer.ts [--rows 200000] [--accounts 1] [--seconds 60]
 *     [--prefill 0] [--ids v7|random] [--batch 1000] [--no-maintenance]
 *
 * --ids: request ids as the service makes them (time-ordered UUIDv7,
 * src/http/request-context.ts) or random UUIDv4, as it made them before. --prefill: rows already in the ledger before the timed part (a
 * ledger that has run for a while; its primary-key index is what random ids scatter over).
 *
 * Rows are built before the clock starts; the timed part is enqueue() for every row (the
 * writer flushes a batch (--batch rows) in one transaction whenever its queue fills, and the loop
 * waits for that flush) plus the final close(), which drains the rest. The service's
 * maintenance thread runs meanwhile, as in the service (checkpoints, the per-user index:
 * src/store/sqlite/maintenance-worker.ts), in this process (pinned with it, it shares its
 * core). The clock stops when the writer has written every row; the line then says how far
 * the thread's index was behind (`tailAtEnd`, indexed after the clock: `catchUpMs`) and its
 * pace (`threadIndexedPerSecond`). --no-maintenance: SQLite's own checkpoints on this
 * connection and the index written after the clock, as a comparison. The file is then counted: every row must
 * be there, and in the index. Prints one JSON line.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { flagReader } from "./lib/flags";
import { benchLedgerRow } from "./lib/ledger-row";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSqliteStore } from "../../src/store/sqlite";
import { UsageWriter } from "../../src/metering/usage-writer";
import { memoryLogger } from "../../src/logger";
import { attachLedger, indexTail, tailLength } from "../../src/store/sqlite/maintenance-worker";
import { userIndexPath } from "../../src/store/sqlite/user-index";
import { Database } from "bun:sqlite";
import type { UsageRow } from "../../src/budget/usage-row";

const flag = flagReader();
const total = Number(flag("rows", "200000"));
const accounts = Number(flag("accounts", "1"));
const deadline = performance.now() + Number(flag("seconds", "60")) * 1000;
const prefill = Number(flag("prefill", "0"));
const ids = flag("ids", "v7");
const newId = ids === "v7" ? () => Bun.randomUUIDv7() : () => crypto.randomUUID();
/** Rows per transaction: by default the service's own SQLite batch. */
const BATCH = Number(flag("batch", "1000"));
const maintenance = !process.argv.includes("--no-maintenance");

const dir = mkdtempSync(join(tmpdir(), "bench-usage-writer-"));
const path = join(dir, "proxy.sqlite");
try {
  const store = openSqliteStore(path);
  // The per-user index's file, as the maintenance thread writes it.
  const index = new Database(userIndexPath(path), { strict: true });
  index.exec("PRAGMA busy_timeout = 5000");
  attachLedger(index, path);
  const now = Date.now();
  const rows: UsageRow[] = [];
  const makeRows = (n: number) => {
    const out: UsageRow[] = [];
    for (let i = 0; i < n; i++) out.push(makeRow(i));
    return out;
  };
  const makeRow = (i: number): UsageRow => benchLedgerRow(newId(), `user-${i % accounts}`, i, now);
  for (let done = 0; done < prefill; done += 10_000) await store.usageLedger.insertBatch(makeRows(Math.min(10_000, prefill - done)));
  rows.push(...makeRows(total));
  // The prefill's entries are indexed before the clock starts, as a running service's would be.
  indexTail(index);
  store.db.query("PRAGMA wal_checkpoint(TRUNCATE)").get();
  if (maintenance) store.maintenance!.start(memoryLogger());

  // The service's flush interval; with a full queue the writer starts a flush at once anyway.
  const writer = new UsageWriter(store.usageLedger, memoryLogger(), 100, BATCH);
  const t0 = performance.now();
  let enqueued = 0;
  for (const row of rows) {
    writer.enqueue(row);
    enqueued++;
    // A full queue started the writer's own flush: let it finish, as the event loop would
    // between requests, rather than queueing every row in memory before the first is written.
    if (enqueued % BATCH === 0) await writer.flush();
    if ((enqueued & 1023) === 0 && performance.now() > deadline) break;
  }
  await writer.close();
  const seconds = (performance.now() - t0) / 1000;
  // How far the thread was behind when the writer finished, and its own pace meanwhile.
  const tailAtEnd = tailLength(index);
  const threadStats = store.maintenance!.stats;
  // The thread stops first: the rest is indexed here, apart, and timed on its own.
  await store.maintenance!.stop();
  const c0 = performance.now();
  const indexedAtEnd = indexTail(index);
  const catchUpMs = Math.round(performance.now() - c0);

  const counted = (store.db.query("SELECT count(*) AS n FROM usage_ledger").get() as { n: number }).n;
  const totals = (store.db.query("SELECT sum(request_count) AS n FROM usage_totals").get() as { n: number }).n;
  const indexed = (index.query("SELECT count(*) AS n FROM usage_ledger_by_user").get() as { n: number }).n;
  const tailLeft = tailLength(index);
  const stats = writer.stats;
  index.close();
  await store.close();
  console.log(
    JSON.stringify({
      rows: enqueued,
      accounts,
      seconds: Math.round(seconds * 1000) / 1000,
      rowsPerSecond: Math.round(enqueued / seconds),
      flushes: stats.flushes,
      failedFlushes: stats.failedFlushes,
      ids,
      prefill,
      rowsInFile: counted - prefill,
      totalsRequestCount: totals,
      lost: enqueued - (counted - prefill),
      maintenance,
      indexedByThread: threadStats.indexedEntries,
      threadRounds: threadStats.rounds,
      threadFailures: threadStats.failures,
      threadLastError: threadStats.lastError,
      threadIndexedPerSecond: Math.round(threadStats.indexedEntries / seconds),
      tailAtEnd,
      indexedAtEnd,
      catchUpMs,
      checkpointedPagesByThread: threadStats.checkpointedPages,
      notIndexed: counted - indexed,
      tailLeft,
      fileMb: Math.round((statSync(path).size / 1024 / 1024) * 10) / 10,
    }),
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
