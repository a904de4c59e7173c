/**
 * The usage writer against a real PostgreSQL that cannot finish a full batch within the
 * statement timeout (src/metering/usage-writer.ts): a server slowed by a trigger that
 * sleeps on every row stands in for one starved of CPU or disk. Retrying the same batch
 * would time out forever while the queue grows; the writer must make its batches smaller
 * until they commit, and still write every row exactly once.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { openPostgresStore, type PostgresStore } from "../../src/store/postgres";
import { UsageWriter } from "../../src/metering/usage-writer";
import { memoryLogger } from "../../src/logger";
import { startPostgres, type TestPostgres } from "../helpers/postgres";
import { usageRow } from "../helpers/usage-rows";

let pg: TestPostgres;
let store: PostgresStore;
beforeAll(async () => {
  pg = await startPostgres();
  store = await openPostgresStore(await pg.createDatabase(), { poolSize: 4, statementTimeoutMs: 1000 });
});
afterAll(async () => {
  await store?.close();
  await pg?.destroy();
});

// Three accounts, 1,000 nano-USD a row.
const row = (i: number) => usageRow(i, `user-${i % 3}`, 1000);

test("a batch the server cannot finish within the statement timeout is split until it commits; every row is written once", async () => {
  // 5 ms a row: a 400-row batch takes 2 s against the 1 s timeout, 100 rows take 0.5 s.
  await store.database.run((sql) =>
    sql.unsafe(`
      CREATE FUNCTION test_slow_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.005); RETURN NEW; END $$;
      CREATE TRIGGER test_slow_row BEFORE INSERT ON usage_ledger FOR EACH ROW EXECUTE FUNCTION test_slow_row();`),
  );
  const logger = memoryLogger();
  const writer = new UsageWriter(store.usageLedger, logger, 10, 400, 2);
  for (let i = 0; i < 400; i++) writer.enqueue(row(i));
  await writer.close(30_000);

  expect(writer.stats.failedFlushes).toBeGreaterThan(0);
  expect(logger.lines.some((l) => l.includes("statement timeout"))).toBe(true);
  expect(writer.stats).toMatchObject({ pending: 0, written: 400 });
  const [ledger] = await store.database.run((sql) => sql`SELECT count(*)::int AS n, count(DISTINCT request_id)::int AS ids FROM usage_ledger`);
  expect(ledger).toEqual({ n: 400, ids: 400 });
  const [totals] = await store.database.run((sql) => sql`SELECT sum(request_count)::int AS n, sum(spent_nano)::bigint AS spent FROM usage_totals`);
  expect(totals.n).toBe(400);
  expect(Number(totals.spent)).toBe(400 * 1000);
}, 60_000);
