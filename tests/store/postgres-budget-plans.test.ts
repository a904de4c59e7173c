/**
 * The per-call budget function finds its rows by key whatever the statistics say
 * (PostgreSQL migration 15): a session plans budget_reserve_many's statements while
 * usage_totals, freshly analysed, holds one row; the table then grows to 5,000 accounts
 * without a new analyse (autovacuum's next round is up to a minute away). Its reserves must
 * still read each account by its key: no scan of the whole table, counted by PostgreSQL's
 * own per-transaction statistics.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { openPostgresStore, type PostgresStore } from "../../src/store/postgres";
import { startPostgres, type TestPostgres } from "../helpers/postgres";

let pg: TestPostgres;
let store: PostgresStore;
beforeAll(async () => {
  pg = await startPostgres();
  store = await openPostgresStore(await pg.createDatabase(), { poolSize: 2 });
});
afterAll(async () => {
  await store?.close();
  await pg?.destroy();
});

const reserves = (from: number, accounts: string[]) =>
  JSON.stringify(accounts.map((account, i) => ({ account, request: `req-${from + i}`, cap: 1_000_000_000, min: 1, desired: 1000 })));

test("reserves planned while usage_totals held one row still find each account by key once it holds 5,000", async () => {
  const conn = await store.database.sql.reserve();
  try {
    await conn`INSERT INTO usage_totals (account) VALUES ('u/app/2026-11/first')`;
    await conn`ANALYZE usage_totals`;
    // More than five runs: PL/pgSQL's plans for the session are settled by then.
    for (let i = 0; i < 8; i++) await conn`SELECT * FROM budget_reserve_many(${reserves(i * 10, ["u/app/2026-11/first"])}::text::jsonb, 'test')`;
    await conn`INSERT INTO usage_totals (account) SELECT 'u/app/2026-11/user-' || g FROM generate_series(1, 5000) AS g`;

    await conn`BEGIN`;
    const accounts = Array.from({ length: 50 }, (_, i) => `u/app/2026-11/user-${i * 97 + 1}`);
    const decided = await conn`SELECT status FROM budget_reserve_many(${reserves(1000, accounts)}::text::jsonb, 'test')`;
    const [scans] = await conn`SELECT seq_scan::int AS seq, idx_scan::int AS idx FROM pg_stat_xact_user_tables WHERE relname = 'usage_totals'`;
    await conn`COMMIT`;

    expect(decided.map((d: { status: number }) => d.status)).toEqual(accounts.map(() => 1));
    expect(scans).toEqual({ seq: 0, idx: expect.any(Number) });
    expect(scans.idx).toBeGreaterThanOrEqual(accounts.length);
  } finally {
    conn.release();
  }
});

/** Every function a call's batches run (migrations 15, 17 and 18), in name order. */
const PER_CALL_FUNCTIONS = ["budget_reserve_many", "budget_settle_many", "call_journal_close", "call_journal_identify", "rate_limit_take_many"];

test("every per-call function has that setting", async () => {
  // CREATE OR REPLACE FUNCTION drops a function's settings: a later migration that rewrites
  // one of these must set it again, and this says so.
  const rows = await store.database.run(
    (sql) => sql`SELECT proname, proconfig FROM pg_proc WHERE proname = ANY(${sql.array(PER_CALL_FUNCTIONS, "TEXT" as never)}::text[]) ORDER BY proname`,
  );
  expect(rows).toEqual(PER_CALL_FUNCTIONS.map((proname) => ({ proname, proconfig: ["enable_seqscan=off"] })));
});
