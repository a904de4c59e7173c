/**
 * The call journal's churn on a real, durable PostgreSQL (fsync on), and what it does to
 * the reconciler's due-entries claim (src/store/postgres/call-journal.ts `claimDue`).
 *
 *   ./node_modules/.bin/bun scripts/bench/journal-churn-postgres.ts [--seconds 20]
 *     [--rate 3000] [--processes 2] [--accounts 10000] [--backlog 20000] [--busy 0] [--no-pin]
 *
 * Each of --processes stores (its own pool, as a service process has) opens journal
 * entries for --rate calls a second, in tenths, and writes their ledger rows through the
 * usage writer (src/metering/usage-writer.ts, two batches at once, as on PostgreSQL), whose
 * batches delete the entries: every call inserts a journal row and deletes it, as in the
 * service. Before that, each store opens --backlog entries at once and queues their rows:
 * the state of a process that fell behind (a journal of tens of thousands of entries, whose
 * deletes leave as many dead rows until autovacuum's next round). Once a second each store runs `claimDue`, as its reconciler does, in its own
 * sessions (JIT off: src/store/postgres/database.ts); in turn with it, the same
 * repository's `claimDue` runs on a plain session, which keeps the server's default (JIT
 * on). At the end: each claim's time (p50, max), the server's own JIT time per statement
 * (pg_stat_statements), the journal's dead rows, and the writer's rows and failed batches.
 * With 2+ cores, PostgreSQL is pinned to core 0 and this process to core 1; --busy N adds N
 * busy loops on core 0 for the run, as the bench's arms put wrk and the upstream beside
 * PostgreSQL (a server short of CPU, whose autovacuum falls behind the churn). Bounded by
 * --seconds plus a drain; prints one JSON line.
 */
import { availableParallelism } from "node:os";
import { SQL, type ReservedSQL } from "bun";
import { flagReader } from "./lib/flags";
import { startBenchPostgres } from "./lib/postgres";
import { pin } from "./lib/proc";
import { openPostgresStore, type PostgresStore } from "../../src/store/postgres";
import { PostgresCallJournalRepository } from "../../src/store/postgres/call-journal";
import type { PostgresDatabase } from "../../src/store/postgres/database";
import { UsageWriter } from "../../src/metering/usage-writer";
import { memoryLogger } from "../../src/logger";
import { userAccount } from "../../src/budget/accounts";
import type { JournalEntry } from "../../src/store/call-journal";
import type { UsageRow } from "../../src/budget/usage-row";

const flag = flagReader();
const SECONDS = Number(flag("seconds", "20"));
const RATE = Number(flag("rate", "3000"));
const PROCESSES = Number(flag("processes", "2"));
const ACCOUNTS = Number(flag("accounts", "10000"));
const BACKLOG = Number(flag("backlog", "20000"));
const BUSY = Number(flag("busy", "0"));
const PIN = !process.argv.includes("--no-pin") && availableParallelism() >= 2;

setTimeout(
  () => {
    console.error("journal-churn-postgres: over its time budget, giving up");
    process.exit(2);
  },
  (SECONDS + 120) * 1000,
).unref();

let seq = 0;
function call(owner: string): { entry: JournalEntry; row: UsageRow } {
  const user = `user-${seq++ % ACCOUNTS}`;
  const now = Date.now();
  const requestId = Bun.randomUUIDv7();
  const account = userAccount("benchapp", "2026-11", user);
  const shared = { requestId, account, appId: "benchapp", appUserId: user, grantId: null, period: "2026-11", model: "m", streamed: false, startedAt: now };
  return {
    entry: {
      ...shared,
      owner,
      ceilingReservationId: null,
      ceilingReservedNano: null,
      ceilingCapNano: null,
      payer: "app",
      reservedNano: 1_000_000,
      capNano: 10_000_000_000,
      generationId: `gen-${seq}`,
      reconcileReason: null,
      attempts: 0,
    },
    row: {
      ...shared,
      generationId: `gen-${seq}`,
      promptTokens: 27,
      completionTokens: 20,
      costNano: 16_050,
      source: "upstream",
      status: "ok",
      finishedAt: now + 3,
    },
  };
}

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(p * values.length))] ?? NaN;
const ms = (n: number) => Math.round(n * 10) / 10;

const pg = await startBenchPostgres(PIN ? 0 : null, { statements: true });
if (PIN) pin(process.pid, 1);
const url = await pg.createDatabase("journal_churn");
const plain = new SQL(url, { max: PROCESSES });
const stores: PostgresStore[] = [];
const writers: UsageWriter[] = [];
const claims = { store: [] as number[], plain: [] as number[] };
try {
  for (let p = 0; p < PROCESSES; p++) {
    const store = await openPostgresStore(url, { poolSize: 10, statementTimeoutMs: 5000 });
    await store.instances.renew(`p${p}`, 600_000);
    stores.push(store);
    writers.push(new UsageWriter(store.usageLedger, memoryLogger(), 100, 1000, 2));
  }
  // The same repository on a plain session: the server's default JIT setting.
  const plainConn: ReservedSQL = await plain.reserve();
  const plainJournal = new PostgresCallJournalRepository({
    run: (work: (sql: ReservedSQL) => Promise<unknown>) => work(plainConn),
  } as unknown as PostgresDatabase);

  await Promise.all(
    stores.map(async (store, p) => {
      const calls = Array.from({ length: BACKLOG }, () => call(`p${p}`));
      for (let i = 0; i < calls.length; i += 1000) await store.callJournal.record({ open: calls.slice(i, i + 1000).map((c) => c.entry), identify: [] });
      for (const c of calls) writers[p]!.enqueue(c.row);
    }),
  );
  const busy = Array.from({ length: BUSY }, () =>
    Bun.spawn(["timeout", String(SECONDS + 5), ...(PIN ? ["taskset", "-c", "0"] : []), "sh", "-c", "while :; do :; done"], {
      stdio: ["ignore", "ignore", "ignore"],
    }),
  );
  const started = performance.now();
  const churn = setInterval(() => {
    stores.forEach((store, p) => {
      const calls = Array.from({ length: RATE / 10 }, () => call(`p${p}`));
      void store.callJournal.record({ open: calls.map((c) => c.entry), identify: [] }).then(() => {
        for (const c of calls) writers[p]!.enqueue(c.row);
      });
    });
  }, 100);
  const claim = setInterval(async () => {
    for (let p = 0; p < PROCESSES; p++) {
      let t = performance.now();
      await stores[p]!.callJournal.claimDue(`p${p}`, Date.now(), 64, 60_000, "instance_died");
      claims.store.push(performance.now() - t);
      t = performance.now();
      await plainJournal.claimDue(`p${p}`, Date.now(), 64, 60_000, "instance_died");
      claims.plain.push(performance.now() - t);
    }
  }, 1000);
  await Bun.sleep(SECONDS * 1000);
  clearInterval(churn);
  clearInterval(claim);
  for (const loop of busy) loop.kill();
  await Bun.sleep(500);
  await Promise.all(writers.map((w) => w.close(30_000)));
  const seconds = (performance.now() - started) / 1000;
  plainConn.release();

  const admin = new SQL(pg.pg.url, { max: 1 });
  const statements = (await admin`
    SELECT calls::int, round(total_exec_time)::int AS exec_ms,
           round((jit_generation_time + jit_inlining_time + jit_optimization_time + jit_emission_time)::numeric)::int AS jit_ms,
           left(regexp_replace(query, '\\s+', ' ', 'g'), 60) AS query
    FROM pg_stat_statements WHERE calls > 10 ORDER BY total_exec_time DESC LIMIT 5`) as Array<Record<string, unknown>>;
  await admin.close({ timeout: 1 });
  const [journal] = (await plain`SELECT n_live_tup::int AS live, n_dead_tup::int AS dead FROM pg_stat_user_tables WHERE relname = 'call_journal'`) as Array<
    Record<string, number>
  >;
  const [ledger] = (await plain`SELECT count(*)::int AS n FROM usage_ledger`) as Array<{ n: number }>;
  console.log(
    JSON.stringify({
      command: `bun scripts/bench/journal-churn-postgres.ts ${process.argv.slice(2).join(" ")}`.trim(),
      processes: PROCESSES,
      backlogPerProcess: BACKLOG,
      busyLoops: BUSY,
      ratePerProcess: RATE,
      seconds: ms(seconds),
      claimMs: {
        jitOff: { p50: ms(percentile(claims.store, 0.5)), max: ms(Math.max(...claims.store)), n: claims.store.length },
        jitOn: { p50: ms(percentile(claims.plain, 0.5)), max: ms(Math.max(...claims.plain)), n: claims.plain.length },
      },
      statements,
      journal,
      ledgerRows: ledger!.n,
      written: writers.reduce((n, w) => n + w.stats.written, 0),
      failedBatches: writers.reduce((n, w) => n + w.stats.failedFlushes, 0),
    }),
  );
} finally {
  await Promise.all(stores.map((s) => s.close()));
  await plain.close({ timeout: 1 });
  await pg.stop();
}
