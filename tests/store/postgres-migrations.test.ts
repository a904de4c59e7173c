/**
 * PostgreSQL migrations under the advisory lock: instances that start together on an
 * empty database apply each migration exactly once (one of them builds an index
 * CONCURRENTLY meanwhile), a migration run outside a transaction runs again after a stop
 * half-way, an app's rows are paged through their own index, and the CLI runs against it.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { openPostgresStore, type PostgresStore } from "../../src/store/postgres";
import { PG_MIGRATIONS } from "../../src/store/postgres/migrations";
import { startPostgres, type TestPostgres } from "../helpers/postgres";
import { runCli } from "../helpers/server";

let pg: TestPostgres;
beforeAll(async () => {
  pg = await startPostgres();
});
afterAll(async () => {
  await pg?.destroy();
});

test("five instances opening an empty database at once apply every migration once", async () => {
  const url = await pg.createDatabase();
  const stores = await Promise.all(Array.from({ length: 5 }, () => openPostgresStore(url, { poolSize: 2 })));
  await Promise.all(stores.map((s) => s.close()));
  const sql = new SQL(url, { max: 1 });
  try {
    const rows: Array<{ version: number }> = await sql`SELECT version FROM schema_migrations ORDER BY version`;
    expect(rows.map((r) => Number(r.version))).toEqual(PG_MIGRATIONS.map((m) => m.version));
  } finally {
    await sql.close({ timeout: 0 });
  }
});

/** The server's counts of reads of the ledger: whole-table scans, and lookups through the app-and-time index. */
async function ledgerReads(store: PostgresStore): Promise<{ seq: number; byAppTime: number }> {
  const db = store.database;
  await db.run((sql) => sql`SELECT pg_stat_force_next_flush()`);
  const [table] = await db.run((sql) => sql`SELECT seq_scan::int AS seq FROM pg_stat_user_tables WHERE relname = 'usage_ledger'`);
  const [index] = await db.run((sql) => sql`SELECT idx_scan::int AS scans FROM pg_stat_user_indexes WHERE indexrelname = 'usage_ledger_by_app_time'`);
  return { seq: (table as { seq: number }).seq, byAppTime: (index as { scans: number } | undefined)?.scans ?? 0 };
}

test("an app's rows are paged by time through their own index, not by reading the whole ledger", async () => {
  const store = await openPostgresStore(await pg.createDatabase(), { poolSize: 1 });
  try {
    // 50,000 rows of one app over 1,000 users, and 50 of another, as the statistics know them.
    await store.database.run(
      (sql) => sql`
        INSERT INTO usage_ledger (request_id, account, app_id, app_user_id, period, model, cost_nano, source, status, started_at, finished_at)
        SELECT 'r' || lpad(i::text, 8, '0'), 'u/' || app || '/2026-11/user-' || (i % 1000), app, 'user-' || (i % 1000), '2026-11', 'm', 10,
               'upstream', 'ok', 1700000000000 + i, 1700000000001 + i
        FROM generate_series(1, 50050) AS i, LATERAL (SELECT CASE WHEN i <= 50000 THEN 'app1' ELSE 'app2' END AS app) AS a`,
    );
    await store.database.run((sql) => sql`ANALYZE usage_ledger`);
    const before = await ledgerReads(store);
    const first = await store.usageLedger.listForApp("app1", 1700000040000, 1800000000000, 1000);
    const last = first.at(-1)!;
    const second = await store.usageLedger.listForApp("app1", 1700000040000, 1800000000000, 1000, { startedAt: last.startedAt, requestId: last.requestId });
    const after = await ledgerReads(store);
    expect(first[0]!.startedAt).toBe(1700000040000);
    expect(second[0]!.startedAt).toBe(last.startedAt + 1);
    expect(second).toHaveLength(1000);
    expect(after.seq - before.seq).toBe(0);
    expect(after.byAppTime - before.byAppTime).toBe(2);
  } finally {
    await store.close();
  }
});

test("a migration outside a transaction runs again after a stop half-way, and the session's statement timeout comes back", async () => {
  const url = await pg.createDatabase();
  // The first migration run outside a transaction (19), whichever comes after it.
  const last = PG_MIGRATIONS.find((m) => "outsideTransaction" in m)!;
  expect(last).toBeDefined();
  await (await openPostgresStore(url, { poolSize: 1 })).close();
  // As if the process stopped after the index was built, before the version's row.
  const sql = new SQL(url, { max: 1 });
  try {
    await sql`DELETE FROM schema_migrations WHERE version = ${last.version}`;
  } finally {
    await sql.close({ timeout: 0 });
  }
  const store = await openPostgresStore(url, { poolSize: 1, statementTimeoutMs: 4321 });
  try {
    const [index] = await store.database.run((sql) => sql`SELECT indisvalid FROM pg_index WHERE indexrelid = 'usage_ledger_by_app_time'::regclass`);
    expect((index as { indisvalid: boolean }).indisvalid).toBe(true);
    const versions = await store.database.run((sql) => sql`SELECT version FROM schema_migrations WHERE version = ${last.version}`);
    expect(versions).toHaveLength(1);
    const [timeout] = await store.database.run((sql) => sql`SHOW statement_timeout`);
    expect((timeout as { statement_timeout: string }).statement_timeout).toBe("4321ms");
  } finally {
    await store.close();
  }
});

test("the operator CLI creates, lists and revokes against PostgreSQL", async () => {
  const url = await pg.createDatabase();
  const created = await runCli(url, "app", "create", "--name", "on postgres", "--origin", "https://a.example");
  expect(created.code).toBe(0);
  const { appId, keyId } = created.json[0]!;
  const listed = await runCli(url, "app", "list");
  expect(listed.json.map((a) => a.appId)).toEqual([appId]);
  expect((await runCli(url, "key", "rotate", "--app", appId)).code).toBe(0);
  expect((await runCli(url, "key", "revoke", "--app", appId, "--key", keyId)).code).toBe(0);
  expect((await runCli(url, "key", "revoke", "--app", appId, "--key", keyId)).code).toBe(1);
});
