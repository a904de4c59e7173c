/**
 * One page of an app's usage export on PostgreSQL (`listForApp`, as the usage export and the
 * usage reconcile read it, 1,000 rows a page) over a large ledger: how long a page takes
 * through the store, and whether PostgreSQL read it through an index or scanned the table.
 *
 *   ./node_modules/.bin/bun scripts/bench/export-page-postgres.ts [--rows 1000000]
 *     [--users 10000] [--root <checkout>]
 *
 * --root: the checkout whose store (and migrations) is measured (a `git worktree` of another
 * commit, for comparisons); this one by default. A durable PostgreSQL of its own (the tests'
 * harness, fsync on), one app's rows written by `generate_series` in 200,000-row statements
 * and `ANALYZE`d; then five pages from each of three places in time (the start of the range,
 * past its middle by a cursor, the last tenth), the median of each. One JSON line.
 */
import { join, resolve } from "node:path";
import { flagReader } from "./lib/flags";
import { REPO_ROOT } from "./lib/proc";
import { startBenchPostgres } from "./lib/postgres";
import type * as PostgresStoreModule from "../../src/store/postgres";

const flag = flagReader();
const root = resolve(flag("root", REPO_ROOT));
const rows = Number(flag("rows", "1000000"));
const users = Number(flag("users", "10000"));
const { openPostgresStore } = (await import(join(root, "src/store/postgres"))) as typeof PostgresStoreModule;

const PAGE = 1000;
const ROUNDS = 5;
const START = 1_700_000_000_000;
const END = START + rows + 1;

const postgres = await startBenchPostgres(null);
try {
  const store = await openPostgresStore(await postgres.createDatabase(), { poolSize: 2, statementTimeoutMs: 120_000 });
  for (let from = 1; from <= rows; from += 200_000) {
    const to = Math.min(rows, from + 199_999);
    await store.database.run(
      (sql) => sql`
        INSERT INTO usage_ledger (request_id, account, app_id, app_user_id, period, model, cost_nano, source, status, started_at, finished_at)
        SELECT 'r' || lpad(i::text, 10, '0'), 'u/app1/2026-11/user-' || (i % ${users}), 'app1', 'user-' || (i % ${users}), '2026-11', 'm', 10,
               'upstream', 'ok', ${START} + i, ${START} + i + 1
        FROM generate_series(${from}::int, ${to}::int) AS i`,
    );
  }
  await store.database.run((sql) => sql`ANALYZE usage_ledger`);

  const median = async (page: () => Promise<unknown>) => {
    const ms: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const started = performance.now();
      await page();
      ms.push(performance.now() - started);
    }
    return Math.round(ms.sort((a, b) => a - b)[Math.floor(ROUNDS / 2)]! * 100) / 100;
  };
  const middle = START + Math.floor(rows / 2);
  const pageMs = {
    first: await median(() => store.usageLedger.listForApp("app1", START, END, PAGE)),
    afterMiddle: await median(() => store.usageLedger.listForApp("app1", START, END, PAGE, { startedAt: middle, requestId: "r" })),
    lastTenth: await median(() => store.usageLedger.listForApp("app1", START + Math.floor(rows * 0.9), END, PAGE)),
  };
  // The same statement's plan, as the page's repository sends it.
  const plan = (await store.database.run(
    (sql) =>
      sql`EXPLAIN SELECT * FROM usage_ledger WHERE app_id = 'app1' AND started_at >= ${START} AND started_at < ${END} ORDER BY started_at, request_id LIMIT ${PAGE}`,
  )) as Array<{ "QUERY PLAN": string }>;
  const reads = plan.map((step) => step["QUERY PLAN"].trim().replace(/^->\s*/, "")).filter((step) => /Scan/.test(step));
  console.log(JSON.stringify({ root, rows, users, pageMs, reads: reads.map((step) => step.replace(/\s*\(cost=.*$/, "")) }));
  await store.close();
} finally {
  await postgres.stop();
}
