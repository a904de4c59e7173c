/**
 * The journal's per-batch statements find their entries by key whatever the planner
 * thought of the table when it planned them (PostgreSQL migration 18). call_journal holds
 * only the calls in flight, but every call inserts an entry and deletes it, so between two
 * autovacuum rounds (a minute apart) its file grows to thousands of pages of dead entries,
 * while a session's plan made when the table was a page long scans it whole at every batch.
 *
 * Here, as in a service that has just started: a database of its own whose journal was never
 * analysed, the repositories' statements planned on their one connection while it holds one
 * entry, then 20,050 entries opened and 20,000 ended again, and the statement run once more
 * for the 50 in flight, its scans of the journal counted from the server's statistics.
 * Both cases fail with the statements migration 18 replaced, and with its functions
 * without their `enable_seqscan` setting.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { ReservedSQL } from "bun";
import { openPostgresStore, type PostgresStore } from "../../src/store/postgres";
import { startPostgres, type TestPostgres } from "../helpers/postgres";
import { usageRow } from "../helpers/usage-rows";

let pg: TestPostgres;
beforeAll(async () => {
  pg = await startPostgres();
});
afterAll(async () => {
  await pg?.destroy();
});

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

const openEntries = (sql: ReservedSQL, requests: string[]) =>
  sql`INSERT INTO call_journal (request_id, owner, account, app_id, period, model, streamed, started_at, reserved_nano, cap_nano)
      SELECT id, 'test', 'u/app/2026-11/x', 'app', '2026-11', 'm', true, 0, 1, 1 FROM unnest(${sql.array(requests, "TEXT" as never)}::text[]) AS id`;

async function scansAfterGrowth(run: (store: PostgresStore, round: number) => Promise<unknown>): Promise<number> {
  const store = await openPostgresStore(await pg.createDatabase(), { poolSize: 1 });
  const db = store.database;
  // The server's counts, with this connection's pending ones sent first.
  const seqScans = async () => {
    await db.run((sql) => sql`SELECT pg_stat_force_next_flush()`);
    await db.run((sql) => sql`SELECT 1`);
    const [row] = await db.run((sql) => sql`SELECT seq_scan::int AS seq FROM pg_stat_user_tables WHERE relname = 'call_journal'`);
    return (row as { seq: number }).seq;
  };
  try {
    // No autovacuum round in the middle: its analyse would have the statements planned again.
    await db.run((sql) => sql`ALTER TABLE call_journal SET (autovacuum_enabled = false)`);
    await db.run((sql) => openEntries(sql, ["only"]));
    // More than five runs: the connection's plans are settled by then.
    for (let round = 0; round < 8; round++) await run(store, round);
    await db.run((sql) => openEntries(sql, [...ids("ended", 20_000), ...ids("in-flight", 50)]));
    await db.run((sql) => sql`DELETE FROM call_journal WHERE request_id LIKE 'ended-%'`);
    const before = await seqScans();
    await run(store, -1);
    return (await seqScans()) - before;
  } finally {
    await store.close();
  }
}

test("a stream's generation ids are recorded by key once the journal has grown", async () => {
  const scans = await scansAfterGrowth((store, round) =>
    store.callJournal.record({
      open: [],
      identify: ids(round === -1 ? "in-flight" : `absent-${round}`, 50).map((requestId) => ({ requestId, generationId: `gen-${requestId}` })),
    }),
  );
  expect(scans).toBe(0);
});

test("the ledger writer ends its rows' entries by key once the journal has grown", async () => {
  const scans = await scansAfterGrowth((store, round) =>
    store.usageLedger.insertBatch(
      Array.from({ length: 50 }, (_, i) => ({ ...usageRow(1000 * (round + 2) + i), requestId: round === -1 ? `in-flight-${i}` : `written-${round}-${i}` })),
    ),
  );
  expect(scans).toBe(0);
});

test("identify sets the generation ids it is given; close ends the entries it names and counts them", async () => {
  const store = await openPostgresStore(await pg.createDatabase(), { poolSize: 1 });
  try {
    await store.database.run(async (sql) => {
      await openEntries(sql, ["a", "b", "c"]);
      await sql`SELECT call_journal_identify(${sql.array(["a", "c", "absent"], "TEXT" as never)}::text[], ${sql.array(["gen-a", "gen-c", "gen-x"], "TEXT" as never)}::text[])`;
      expect([...(await sql`SELECT request_id, generation_id FROM call_journal ORDER BY request_id`)]).toEqual([
        { request_id: "a", generation_id: "gen-a" },
        { request_id: "b", generation_id: null },
        { request_id: "c", generation_id: "gen-c" },
      ]);
      const [closed] = await sql`SELECT call_journal_close(${sql.array(["a", "b", "absent"], "TEXT" as never)}::text[]) AS n`;
      expect(closed.n).toBe(2);
      expect([...(await sql`SELECT request_id FROM call_journal`)]).toEqual([{ request_id: "c" }]);
    });
  } finally {
    await store.close();
  }
});
