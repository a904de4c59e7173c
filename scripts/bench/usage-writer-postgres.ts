/**
 * The usage writer (src/metering/usage-writer.ts) into a real, durable PostgreSQL (fsync on,
 * synchronous_commit on: every batch's commit waits for the WAL to reach the disk), through
 * the store as the service opens it (`openPostgresStore`, its migrations, its pool):
 * how many ledger rows per second, and where a batch's time goes.
 *
 *   ./node_modules/.bin/bun scripts/bench/usage-writer-postgres.ts [--rows 300000]
 *     [--accounts 1000] [--batch 1000,5000] [--flush-ms 100] [--concurrency 2] [--seconds 120]
 *     [--profile-rows 50000] [--no-profile] [--no-sqlite] [--no-pin] [--wait-quiet 60]
 *     [--out tmp/bench/usage-writer-postgres.json]
 *
 * Each batch size gets a fresh database. Rows (spread round-robin over --accounts budget
 * accounts, UUIDv7 ids as the service makes them) are built before the clock starts; the
 * timed part runs from the first enqueue() to the end of close(), which resolves once the
 * last batch is committed. The producer enqueues as fast as it can and only yields to the
 * event loop every 1,000 rows (so the writer's flushes run beside it, as between requests),
 * never waiting for a flush. Then `count(*)` of usage_ledger and `sum(request_count)` of
 * usage_totals must both equal the rows enqueued.
 *
 * --profile: on fresh databases, the pieces of one batch timed on their own (INSERT alone,
 * INSERT … RETURNING, the whole insertBatch with its totals; and the whole insertBatch with
 * synchronous_commit off, which is the commit's wait for the disk; and with every row on
 * one account, so the totals step updates one row per batch instead of up to --accounts).
 * --sqlite: the same rows and accounts through scripts/bench/usage-writer.ts (SQLite file,
 * WAL, batch 1,000), for comparison in the same run.
 *
 * With 2+ cores: this process on core 1, PostgreSQL (postmaster and backends) on core 0.
 * Stops itself (a watchdog bounds the whole run) and destroys its Postgres at the end.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { dirname, resolve } from "node:path";
import { flagReader } from "./lib/flags";
import { describeMachine, loadAverage, waitForQuiet } from "./lib/machine";
import { startBenchPostgres, type BenchPostgres } from "./lib/postgres";
import { BUN, childEnv, cpuSeconds, pin, REPO_ROOT, spawnPinned } from "./lib/proc";
import { openPostgresStore, type PostgresStore } from "../../src/store/postgres";
import { ledgerRecord } from "../../src/store/postgres/usage-ledger";
import { UsageWriter } from "../../src/metering/usage-writer";
import { userAccount } from "../../src/budget/accounts";
import { memoryLogger } from "../../src/logger";
import type { UsageLedgerRepository } from "../../src/store/usage-ledger";
import type { UsageRow } from "../../src/budget/usage-row";

const args = process.argv.slice(2);
const flag = flagReader(args);
const has = (name: string) => args.includes(`--${name}`);
const ROWS = Number(flag("rows", "300000"));
const ACCOUNTS = Number(flag("accounts", "1000"));
const BATCHES = flag("batch", "1000,5000").split(",").map(Number);
const FLUSH_MS = Number(flag("flush-ms", "100"));
/** Batches written at once, as the service does on PostgreSQL (src/deps.ts). */
const CONCURRENCY = Number(flag("concurrency", "2"));
const SECONDS = Number(flag("seconds", "120"));
const PROFILE_ROWS = Number(flag("profile-rows", "50000"));
const PROFILE = !has("no-profile");
const SQLITE = !has("no-sqlite");
const PIN = !has("no-pin") && availableParallelism() >= 2;
const WAIT_QUIET = Number(flag("wait-quiet", "60"));
const OUT = resolve(REPO_ROOT, flag("out", "tmp/bench/usage-writer-postgres.json"));
const COMMAND = `./node_modules/.bin/bun scripts/bench/usage-writer-postgres.ts ${args.join(" ")}`.trim();
const TARGET = 50_000;
const PG_CORE = 0;
const WRITER_CORE = 1;
const YIELD_EVERY = 1000;
/** Full batches written before the clock starts: twice the store's default pool of 10. */
const WARM_BATCHES = 20;

const log = (line: string) => console.error(`[usage-writer-postgres ${new Date().toISOString().slice(11, 19)}] ${line}`);

// The whole run is bounded: exiting runs the Postgres helper's exit hook, which stops the server.
const budgetSeconds = WAIT_QUIET + BATCHES.length * (SECONDS + 30) + (PROFILE ? 120 : 0) + (SQLITE ? SECONDS + 30 : 0) + 60;
setTimeout(() => {
  log(`over its ${budgetSeconds} s budget: giving up`);
  process.exit(2);
}, budgetSeconds * 1000).unref();

let seq = 0;
function makeRows(n: number, accounts = ACCOUNTS): UsageRow[] {
  const now = Date.now();
  const rows: UsageRow[] = new Array(n);
  for (let i = 0; i < n; i++, seq++) {
    const user = `user-${seq % accounts}`;
    rows[i] = {
      requestId: Bun.randomUUIDv7(),
      account: userAccount("benchapp", "2026-11", user),
      appId: "benchapp",
      appUserId: user,
      grantId: null,
      period: "2026-11",
      model: "openai/gpt-4o-mini",
      generationId: `gen-${now}-${seq.toString(36).padStart(12, "0")}`,
      promptTokens: 27,
      completionTokens: 20,
      costNano: 16050,
      source: "upstream",
      status: "ok",
      streamed: seq % 2 === 0,
      startedAt: now + i,
      finishedAt: now + i + 3,
      reservedNano: 1_000_000,
      overrunNano: 0,
      frozenCapNano: null,
    };
  }
  return rows;
}

const percentile = (sorted: number[], p: number) => (sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!);
const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;
const int = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "–");

async function counts(url: string): Promise<{ ledger: number; totals: number }> {
  const sql = new Bun.SQL(url, { max: 1 });
  try {
    const [l] = (await sql`SELECT count(*)::bigint AS n FROM usage_ledger`) as Array<{ n: string }>;
    const [t] = (await sql`SELECT coalesce(sum(request_count), 0)::bigint AS n FROM usage_totals`) as Array<{ n: string }>;
    return { ledger: Number(l!.n), totals: Number(t!.n) };
  } finally {
    await sql.close({ timeout: 1 });
  }
}

interface WriterRun {
  batch: number;
  /** Set when a flush failed (the writer keeps the rows and retries; the run stops there). */
  error?: string;
  rows: number;
  accounts: number;
  seconds: number;
  rowsPerSecond: number;
  enqueueSeconds: number;
  maxPending: number;
  flushes: number;
  failedFlushes: number;
  batchMs: { mean: number; p50: number; p99: number; max: number };
  /** Share of the wall time spent inside insertBatch (1.0: the writer never waited for work). */
  busy: number;
  cpu: { writer: number; postgres: number };
  ledgerRows: number;
  totalsRequestCount: number;
  lost: number;
}

async function writerRun(pg: BenchPostgres, batch: number): Promise<WriterRun> {
  const url = await pg.createDatabase(`writer_b${batch}`);
  const store = await openPostgresStore(url);
  const batchTimes: number[] = [];
  const timed: UsageLedgerRepository = {
    insertBatch: async (rows) => {
      const t = performance.now();
      try {
        return await store.usageLedger.insertBatch(rows);
      } finally {
        batchTimes.push(performance.now() - t);
      }
    },
    listForUser: (...a) => store.usageLedger.listForUser(...a),
    find: (id) => store.usageLedger.find(id),
    listForApp: (...a) => store.usageLedger.listForApp(...a),
  };
  const rows = makeRows(ROWS);
  // Outside the clock, warm what a running service has warm: each pooled connection's
  // prepared statement for a full batch (Bun.SQL prepares per connection), and the plan.
  let warmError: string | undefined;
  try {
    for (let i = 0; i < WARM_BATCHES; i++) await store.usageLedger.insertBatch(makeRows(batch));
  } catch (err) {
    warmError = err instanceof Error ? err.message : String(err);
  }
  const base = await counts(url);
  const writer = new UsageWriter(timed, memoryLogger(), FLUSH_MS, batch, CONCURRENCY);
  const deadline = performance.now() + SECONDS * 1000;
  const cpuWriter0 = cpuSeconds(process.pid);
  const cpuPg0 = pg.cpuSeconds();
  const t0 = performance.now();
  let enqueued = 0;
  let maxPending = 0;
  for (const row of rows) {
    writer.enqueue(row);
    enqueued++;
    if (enqueued % YIELD_EVERY === 0) {
      const stats = writer.stats;
      maxPending = Math.max(maxPending, stats.pending);
      await new Promise<void>((r) => setImmediate(r));
      if (performance.now() > deadline || stats.failedFlushes > 0) break;
    }
  }
  const enqueueSeconds = (performance.now() - t0) / 1000;
  // What close() does, without its retries until a deadline: a failed flush ends the run
  // (it would fail the same way again). Then close() itself, with nothing left to write.
  for (;;) {
    await writer.flush();
    const stats = writer.stats;
    if (stats.pending === 0 || stats.failedFlushes > 0 || performance.now() > deadline) break;
  }
  await writer.close(0);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = { writer: (cpuSeconds(process.pid) - cpuWriter0) / seconds, postgres: (pg.cpuSeconds() - cpuPg0) / seconds };
  const stats = writer.stats;
  await store.close();
  const after = await counts(url);
  const ledgerRows = after.ledger - base.ledger;
  const totalsRequestCount = after.totals - base.totals;
  const sorted = [...batchTimes].sort((a, b) => a - b);
  const error = warmError ?? stats.lastError ?? undefined;
  return {
    batch,
    ...(error ? { error } : {}),
    rows: enqueued,
    accounts: ACCOUNTS,
    seconds: round(seconds, 3),
    rowsPerSecond: Math.round(enqueued / seconds),
    enqueueSeconds: round(enqueueSeconds, 3),
    maxPending,
    flushes: stats.flushes,
    failedFlushes: stats.failedFlushes,
    batchMs: {
      mean: round(sorted.reduce((a, b) => a + b, 0) / sorted.length, 2),
      p50: round(percentile(sorted, 50), 2),
      p99: round(percentile(sorted, 99), 2),
      max: round(sorted.at(-1) ?? NaN, 2),
    },
    busy: round(sorted.reduce((a, b) => a + b, 0) / 1000 / seconds, 2),
    cpu: { writer: round(cpu.writer, 2), postgres: round(cpu.postgres, 2) },
    ledgerRows,
    totalsRequestCount,
    lost: enqueued - ledgerRows,
  };
}

/** usage_ledger's columns as ledgerRecord names them, with their types (src/store/postgres/migrations.ts). */
const LEDGER_COLUMNS: Array<[string, string]> = [
  ["request_id", "text"],
  ["account", "text"],
  ["app_id", "text"],
  ["app_user_id", "text"],
  ["grant_id", "text"],
  ["period", "text"],
  ["model", "text"],
  ["generation_id", "text"],
  ["prompt_tokens", "bigint"],
  ["completion_tokens", "bigint"],
  ["cost_nano", "bigint"],
  ["source", "text"],
  ["status", "text"],
  ["streamed", "boolean"],
  ["started_at", "bigint"],
  ["finished_at", "bigint"],
  ["reserved_nano", "bigint"],
  ["overrun_nano", "bigint"],
];
const UNNEST_INSERT = `INSERT INTO usage_ledger (${LEDGER_COLUMNS.map(([c]) => c).join(", ")})
  SELECT * FROM unnest(${LEDGER_COLUMNS.map(([, type], i) => `$${i + 1}::${type}[]`).join(", ")})
  ON CONFLICT (request_id) DO NOTHING RETURNING request_id`;

interface ProfileRow {
  batch: number;
  step: string;
  batches: number;
  msPerBatch: number;
  rowsPerSecond: number;
  error?: string;
}

/** One batch's pieces, each timed alone on a fresh database, batches one after another as the writer runs them. */
async function profile(pg: BenchPostgres, batch: number): Promise<ProfileRow[]> {
  const out: ProfileRow[] = [];
  const n = Math.max(batch, Math.floor(PROFILE_ROWS / batch) * batch);
  const steps: Array<{ step: string; db?: string; accounts?: number; run: (store: PostgresStore, rows: UsageRow[]) => Promise<unknown> }> = [
    {
      step: "INSERT alone (no RETURNING, no totals)",
      run: (store, rows) =>
        store.database.run((sql) => sql.begin((tx) => tx`INSERT INTO usage_ledger ${tx(rows.map(ledgerRecord))} ON CONFLICT (request_id) DO NOTHING`)),
    },
    {
      step: "INSERT … RETURNING request_id (no totals)",
      run: (store, rows) =>
        store.database.run((sql) =>
          sql.begin((tx) => tx`INSERT INTO usage_ledger ${tx(rows.map(ledgerRecord))} ON CONFLICT (request_id) DO NOTHING RETURNING request_id`),
        ),
    },
    { step: "insertBatch (INSERT … RETURNING, then totals): as the writer does", run: (store, rows) => store.usageLedger.insertBatch(rows) },
    { step: "insertBatch with synchronous_commit off (no wait for the disk)", db: "async", run: (store, rows) => store.usageLedger.insertBatch(rows) },
    { step: "insertBatch, every row on one account (one totals row per batch)", accounts: 1, run: (store, rows) => store.usageLedger.insertBatch(rows) },
    {
      // Not what src does: one array per column, so 18 parameters whatever the batch size
      // (the multi-row VALUES form above has 18 per row, and the wire protocol allows 65,535).
      step: "INSERT … SELECT FROM unnest(one array per column) RETURNING request_id (no totals; an alternative)",
      run: (store, rows) => {
        const records = rows.map(ledgerRecord);
        const arrays = LEDGER_COLUMNS.map(([column]) =>
          records.map((r) => {
            const v = r[column as keyof typeof r];
            return v === null ? null : String(v);
          }),
        );
        return store.database.run((sql) =>
          sql.begin((tx) =>
            tx.unsafe(
              UNNEST_INSERT,
              arrays.map((a) => tx.array(a, "TEXT")),
            ),
          ),
        );
      },
    },
  ];
  for (const [i, s] of steps.entries()) {
    const url = await pg.createDatabase(`profile_b${batch}_${i}`);
    if (s.db === "async") {
      const admin = new Bun.SQL(url, { max: 1 });
      await admin.unsafe(`ALTER DATABASE "profile_b${batch}_${i}" SET synchronous_commit = off`);
      await admin.close({ timeout: 1 });
    }
    const store = await openPostgresStore(url);
    try {
      for (let w = 0; w < WARM_BATCHES; w++) await s.run(store, makeRows(batch, s.accounts)); // each pooled connection's statement
      const rows = makeRows(n, s.accounts);
      const t0 = performance.now();
      for (let j = 0; j < rows.length; j += batch) await s.run(store, rows.slice(j, j + batch));
      const ms = performance.now() - t0;
      const { ledger } = await counts(url);
      if (ledger !== n + WARM_BATCHES * batch) throw new Error(`${ledger} rows in the ledger, expected ${n + WARM_BATCHES * batch}`);
      out.push({ batch, step: s.step, batches: n / batch, msPerBatch: round(ms / (n / batch), 2), rowsPerSecond: Math.round(n / (ms / 1000)) });
    } catch (err) {
      out.push({ batch, step: s.step, batches: 0, msPerBatch: NaN, rowsPerSecond: NaN, error: err instanceof Error ? err.message : String(err) });
    } finally {
      await store.close();
    }
  }
  // The JavaScript side alone: mapping rows to records (no database).
  const rows = makeRows(n);
  const t0 = performance.now();
  for (let j = 0; j < rows.length; j += batch) rows.slice(j, j + batch).map(ledgerRecord);
  const ms = performance.now() - t0;
  out.push({
    batch,
    step: "rows → records in JavaScript (ledgerRecord), no database",
    batches: n / batch,
    msPerBatch: round(ms / (n / batch), 2),
    rowsPerSecond: Math.round(n / (ms / 1000)),
  });
  return out;
}

interface SqliteRun {
  rows: number;
  accounts: number;
  seconds: number;
  rowsPerSecond: number;
  lost: number;
  totalsRequestCount: number;
}

/** scripts/bench/usage-writer.ts as `npm run bench` runs it (pinned to the writer core), with these rows and accounts. */
async function sqliteRun(): Promise<SqliteRun> {
  const child = spawnPinned(
    "usage-writer",
    PIN ? WRITER_CORE : null,
    [BUN, "scripts/bench/usage-writer.ts", "--rows", String(ROWS), "--accounts", String(ACCOUNTS), "--seconds", String(SECONDS)],
    childEnv(),
  );
  const code = await Promise.race([child.proc.exited, Bun.sleep((SECONDS + 30) * 1000).then(() => null)]);
  if (code === null) await child.stop(1000);
  await Bun.sleep(50);
  const line = child.lines.find((l) => l.startsWith("{"));
  if (code !== 0 || !line) throw new Error(`usage-writer.ts failed (${code}):\n${child.lines.slice(-10).join("\n")}`);
  return JSON.parse(line) as SqliteRun;
}

async function main(): Promise<void> {
  const machine = describeMachine();
  // Bounded: waits for a 1-minute load below 0.5 and no `bun test` running, then goes on anyway.
  const quiet = await waitForQuiet(WAIT_QUIET, log);
  const loadAtStart = loadAverage();
  const startedAt = new Date().toISOString();
  if (PIN) pin(process.pid, WRITER_CORE);
  const pg = await startBenchPostgres(PIN ? PG_CORE : null);
  log(`PostgreSQL ${pg.version}, fsync on, port ${pg.pg.port}${PIN ? `, pinned to core ${PG_CORE}; this process on core ${WRITER_CORE}` : ", not pinned"}`);
  const runs: WriterRun[] = [];
  const profiles: ProfileRow[] = [];
  let sqlite: SqliteRun | { error: string } | null = null;
  try {
    for (const batch of BATCHES) {
      const r = await writerRun(pg, batch);
      runs.push(r);
      if (r.error) log(`batch ${batch}: a flush failed: ${r.error}`);
      log(
        `batch ${batch}: ${int(r.rowsPerSecond)} rows/s (${r.rows} rows in ${r.seconds} s; ${r.flushes} flushes, ${r.batchMs.mean} ms mean per batch); ledger ${r.ledgerRows}, totals ${r.totalsRequestCount}, lost ${r.lost}`,
      );
    }
    if (PROFILE) {
      for (const batch of BATCHES) {
        const p = await profile(pg, batch);
        profiles.push(...p);
        for (const x of p)
          log(`profile batch ${batch}: ${x.step}: ${x.error ? `failed: ${x.error}` : `${x.msPerBatch} ms per batch, ${int(x.rowsPerSecond)} rows/s`}`);
      }
    }
  } finally {
    await pg.stop();
  }
  if (SQLITE) {
    try {
      sqlite = await sqliteRun();
      log(`SQLite writer: ${int(sqlite.rowsPerSecond)} rows/s`);
    } catch (err) {
      sqlite = { error: String(err) };
      log(`SQLite writer failed: ${String(err)}`);
    }
  }

  const lines: string[] = [];
  lines.push(`Command: \`${COMMAND}\``);
  lines.push("");
  lines.push(
    `Run ${startedAt} → ${new Date().toISOString()} (UTC) on ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGb} GB, ${machine.kernel}, Bun ${machine.bun}. Load average ${loadAtStart} at start, ${loadAverage()} at end; ${quiet.quiet ? `machine quiet (waited ${quiet.waitedSeconds} s)` : `**machine not quiet** after ${quiet.waitedSeconds} s (load ${quiet.loadAtStart}, ${quiet.otherTestRunsAtStart} other test runs)`}.`,
  );
  lines.push("");
  lines.push(
    `${ROWS.toLocaleString("en-US")} rows over ${ACCOUNTS.toLocaleString("en-US")} account${ACCOUNTS === 1 ? "" : "s"}; PostgreSQL ${pg.version}, fsync on, synchronous_commit on; flush interval ${FLUSH_MS} ms; ${CONCURRENCY} batch${CONCURRENCY === 1 ? "" : "es"} at once; ${PIN ? `writer on core ${WRITER_CORE}, PostgreSQL on core ${PG_CORE}` : "not pinned"}. Target: ≥ ${TARGET.toLocaleString("en-US")} rows/s.`,
  );
  lines.push("");
  lines.push(
    "| store | batch | rows | seconds | rows/s | vs target | flushes | ms per batch (mean / p50 / p99) | writer busy | CPU: writer / postgres | ledger rows | totals request_count | lost |",
  );
  lines.push("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: |");
  for (const r of runs) {
    if (r.error) {
      lines.push(
        `| PostgreSQL | ${int(r.batch)} | failed: ${r.error.replaceAll("|", "/").slice(0, 160)} (${int(r.ledgerRows)} rows written of ${int(r.rows)} enqueued) |`,
      );
      continue;
    }
    lines.push(
      `| PostgreSQL | ${int(r.batch)} | ${int(r.rows)} | ${r.seconds} | ${int(r.rowsPerSecond)} | ${(r.rowsPerSecond / TARGET).toFixed(2)}× | ${int(r.flushes)} | ${r.batchMs.mean} / ${r.batchMs.p50} / ${r.batchMs.p99} | ${r.busy.toFixed(2)} | ${r.cpu.writer.toFixed(2)} / ${r.cpu.postgres.toFixed(2)} | ${int(r.ledgerRows)} | ${int(r.totalsRequestCount)} | **${int(r.lost)}** |`,
    );
  }
  if (sqlite && "rowsPerSecond" in sqlite) {
    lines.push(
      `| SQLite file, WAL (scripts/bench/usage-writer.ts) | 1,000 | ${int(sqlite.rows)} | ${sqlite.seconds} | ${int(sqlite.rowsPerSecond)} | ${(sqlite.rowsPerSecond / TARGET).toFixed(2)}× | – | – | – | – | ${int(sqlite.rows - sqlite.lost)} | ${int(sqlite.totalsRequestCount)} | **${int(sqlite.lost)}** |`,
    );
  } else if (sqlite) {
    lines.push(`| SQLite file, WAL | failed: ${sqlite.error.replaceAll("|", "/").slice(0, 120)} |`);
  }
  if (profiles.length > 0) {
    lines.push("");
    lines.push(`Where a batch's time goes (each step on a fresh database, ${PROFILE_ROWS.toLocaleString("en-US")} rows in batches one after another):`);
    lines.push("");
    lines.push("| batch | step | batches | ms per batch | rows/s |");
    lines.push("| ---: | --- | ---: | ---: | ---: |");
    for (const p of profiles)
      lines.push(
        p.error
          ? `| ${int(p.batch)} | ${p.step} | failed: ${p.error.replaceAll("|", "/").slice(0, 120)} | – | – |`
          : `| ${int(p.batch)} | ${p.step} | ${p.batches} | ${p.msPerBatch} | ${int(p.rowsPerSecond)} |`,
      );
  }
  console.log(lines.join("\n"));

  mkdirSync(dirname(OUT), { recursive: true });
  writeFileSync(
    OUT,
    JSON.stringify(
      {
        command: COMMAND,
        startedAt,
        finishedAt: new Date().toISOString(),
        machine,
        quiet,
        loadAtStart,
        loadAtEnd: loadAverage(),
        postgres: pg.version,
        rows: ROWS,
        accounts: ACCOUNTS,
        flushMs: FLUSH_MS,
        concurrency: CONCURRENCY,
        pinned: PIN,
        runs,
        profiles,
        sqlite,
      },
      null,
      2,
    ),
  );
  log(`results: ${OUT}`);
  const bad = runs.filter((r) => r.error || r.lost !== 0 || r.totalsRequestCount !== r.rows || r.ledgerRows !== r.rows || r.failedFlushes > 0);
  if (bad.length > 0) {
    log(`rows missing or counted wrong at batch ${bad.map((r) => r.batch).join(", ")}`);
    process.exitCode = 1;
  }
}

await main();
process.exit(process.exitCode ?? 0);
