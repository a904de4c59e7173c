/**
 * Micro-benchmark of src/metering/usage-writer.ts against a real SQLite file (WAL, the
 * service's own migrations and pragmas): how many ledger rows per second it writes.
 *
 *   bun scripts/bench/usage-writer.ts [--rows 200000] [--accounts 1] [--seconds 60]
 *     [--prefill 0] [--ids v7|random] [--batch 1000]
 *
 * --ids: request ids as the service makes them (time-ordered UUIDv7,
 * src/http/request-context.ts) or random UUIDv4, as it made them before. --prefill: rows already in the ledger before the timed part (a
 * ledger that has run for a while; its primary-key index is what random ids scatter over).
 *
 * Rows are built before the clock starts; the timed part is enqueue() for every row (the
 * writer flushes a batch (--batch rows) in one transaction whenever its queue fills, and the loop
 * waits for that flush) plus the final close(), which drains the rest. The file is then
 * counted: every row must be there. Prints one JSON line.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { flagReader } from "./lib/flags";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSqliteStore } from "../../src/store/sqlite";
import { UsageWriter } from "../../src/metering/usage-writer";
import { userAccount } from "../../src/budget/accounts";
import { memoryLogger } from "../../src/logger";
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

const dir = mkdtempSync(join(tmpdir(), "bench-usage-writer-"));
const path = join(dir, "proxy.sqlite");
try {
  const store = openSqliteStore(path);
  const now = Date.now();
  const rows: UsageRow[] = [];
  const makeRows = (n: number) => {
    const out: UsageRow[] = [];
    for (let i = 0; i < n; i++) out.push(makeRow(i));
    return out;
  };
  const makeRow = (i: number): UsageRow => {
    const user = `user-${i % accounts}`;
    return {
      requestId: newId(),
      account: userAccount("benchapp", "2026-11", user),
      appId: "benchapp",
      appUserId: user,
      grantId: null,
      period: "2026-11",
      model: "openai/gpt-4o-mini",
      generationId: `gen-${now}-${i.toString(36).padStart(12, "0")}`,
      promptTokens: 27,
      completionTokens: 20,
      costNano: 16050,
      source: "upstream",
      status: "ok",
      streamed: i % 2 === 0,
      startedAt: now + i,
      finishedAt: now + i + 3,
    };
  };
  for (let done = 0; done < prefill; done += 10_000) await store.usageLedger.insertBatch(makeRows(Math.min(10_000, prefill - done)));
  rows.push(...makeRows(total));

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

  const counted = (store.db.query("SELECT count(*) AS n FROM usage_ledger").get() as { n: number }).n;
  const totals = (store.db.query("SELECT sum(request_count) AS n FROM usage_totals").get() as { n: number }).n;
  const stats = writer.stats;
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
      fileMb: Math.round((statSync(path).size / 1024 / 1024) * 10) / 10,
    }),
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
