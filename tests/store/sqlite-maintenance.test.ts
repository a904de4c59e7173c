/**
 * The SQLite file's upkeep off the event loop (src/store/sqlite/maintenance.ts): the ledger's
 * per-user index written late and sorted by a thread of its own, checkpoints there too, and
 * readers that see every row whether the thread has reached it or not.
 */
import { afterEach, expect, setDefaultTimeout, test } from "bun:test";
import { Database } from "bun:sqlite";
import { rmSync, statSync } from "node:fs";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite";
import { SqliteMaintenance } from "../../src/store/sqlite/maintenance";
import { attachLedger, checkpoint, indexTail, tailLength } from "../../src/store/sqlite/maintenance-worker";
import { openUserIndexReader, userIndexPath } from "../../src/store/sqlite/user-index";
import { LIST_BEFORE_CURSOR, listForUserSql } from "../../src/store/sqlite/usage-ledger";
import { memoryLogger } from "../../src/logger";
import { userAccount } from "../../src/budget/accounts";
import type { UsageRow } from "../../src/budget/usage-row";
import { tempDatabase } from "../helpers/server";

setDefaultTimeout(30_000);

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The thread's connection to a database's per-user index, the database attached. */
function indexConnection(path: string): Database {
  const index = new Database(userIndexPath(path), { strict: true });
  attachLedger(index, path);
  return index;
}

/** A store on a file, and a connection to its per-user index's file, as the thread has. */
function fileStore(): SqliteStore & { index: Database } {
  const temp = tempDatabase();
  const store = openSqliteStore(temp.path);
  const index = indexConnection(temp.path);
  cleanups.push(
    temp.cleanup,
    () => store.close(),
    () => index.close(),
  );
  return Object.assign(store, { index });
}

let clock = 1_700_000_000_000;
const row = (user: string | null, over: Partial<UsageRow> = {}): UsageRow => {
  clock += 1;
  return {
    requestId: Bun.randomUUIDv7(),
    account: userAccount("app1", "2026-11", user ?? "grant"),
    appId: "app1",
    appUserId: user,
    grantId: user === null ? "grant1" : null,
    period: "2026-11",
    model: "openai/gpt-4o-mini",
    generationId: null,
    promptTokens: 1,
    completionTokens: 1,
    costNano: 10,
    source: "upstream",
    status: "ok",
    streamed: false,
    startedAt: clock,
    finishedAt: clock + 1,
    ...over,
  };
};

const ids = (rows: UsageRow[]) => rows.map((r) => r.requestId);
/** Newest first, as listForUser answers. */
const newestFirst = (rows: UsageRow[]) => [...rows].sort((a, b) => b.startedAt - a.startedAt || (a.requestId < b.requestId ? 1 : -1));

/** Every page of a user's listing, `limit` at a time. */
async function listAll(store: SqliteStore, user: string, limit: number): Promise<UsageRow[]> {
  const out: UsageRow[] = [];
  for (;;) {
    const last = out.at(-1);
    const page = await store.usageLedger.listForUser("app1", user, "2026-11", limit, last && { startedAt: last.startedAt, requestId: last.requestId });
    out.push(...page);
    if (page.length < limit) return out;
  }
}

test("a user's rows are listed the same before the index has them, after, and half-way", async () => {
  const store = fileStore();
  const alice = [row("alice"), row("alice"), row("alice")];
  await store.usageLedger.insertBatch([...alice, row("bob"), row(null)]);
  // Nothing indexed yet: all of it is the tail, scanned.
  expect(tailLength(store.index)).toBe(5);
  expect(ids(await listAll(store, "alice", 2))).toEqual(ids(newestFirst(alice)));

  // Indexed (grant rows have no user, so no entry): the tail is empty.
  expect(indexTail(store.index)).toBe(4);
  expect(tailLength(store.index)).toBe(0);
  expect(ids(await listAll(store, "alice", 2))).toEqual(ids(newestFirst(alice)));

  // More rows: some indexed, some in the tail; a cursor pages across the boundary.
  const more = [row("alice"), row("alice")];
  await store.usageLedger.insertBatch(more);
  expect(ids(await listAll(store, "alice", 2))).toEqual(ids(newestFirst([...alice, ...more])));
  expect(ids(await listAll(store, "bob", 10))).toHaveLength(1);
});

test("a listing reads the tail by rowid from the mark, never every row of the app, with the file's statistics or without", async () => {
  const store = fileStore();
  await store.usageLedger.insertBatch(Array.from({ length: 2000 }, (_, i) => row(`user-${i % 50}`)));
  indexTail(store.index);
  await store.usageLedger.insertBatch(Array.from({ length: 20 }, (_, i) => row(`user-${i % 50}`)));
  const reader = openUserIndexReader(store.db, store.db.filename);
  cleanups.push(() => reader.close());
  const plan = (sql: string, ...params: Array<string | number>) =>
    reader
      .query<{ detail: string }, Array<string | number>>(`EXPLAIN QUERY PLAN ${sql}`)
      .all(...params)
      .map((step) => step.detail);
  for (const analysed of [false, true]) {
    if (analysed) store.db.exec("ANALYZE");
    for (const cursor of [[], [0, ""]]) {
      const sql = listForUserSql(cursor.length ? LIST_BEFORE_CURSOR : "");
      const steps = plan(sql, "app1", "user-1", "2026-11", 50, ...cursor);
      expect(steps).toContain("SEARCH usage_ledger USING INTEGER PRIMARY KEY (rowid>?)");
      expect(steps.filter((step) => /usage_ledger USING|SCAN usage_ledger\b/.test(step) && !step.includes("rowid"))).toEqual([]);
    }
  }
  expect(ids(await listAll(store, "user-1", 100))).toHaveLength(41);
});

test("a row both indexed and still in the tail (as a file written before entries and mark shared one transaction may hold) is listed once", async () => {
  const store = fileStore();
  const rows = [row("carol"), row("carol"), row("carol")];
  await store.usageLedger.insertBatch(rows);
  // As the thread once left a file between two transactions of one tail: entries written, mark not moved.
  store.db.exec(`ATTACH DATABASE '${userIndexPath(store.db.filename)}' AS user_index`);
  store.db.exec("INSERT INTO user_index.usage_ledger_by_user SELECT app_id, app_user_id, period, started_at, request_id FROM usage_ledger");
  store.db.exec("DETACH DATABASE user_index");
  expect(tailLength(store.index)).toBe(3);
  expect(ids(await listAll(store, "carol", 2))).toEqual(ids(newestFirst(rows)));
  // Indexing that tail again writes nothing twice.
  indexTail(store.index);
  expect(store.index.query<{ n: number }, []>("SELECT count(*) AS n FROM usage_ledger_by_user").get()!.n).toBe(3);
});

test("indexing never waits for the database's write lock, which the serving connection may hold", async () => {
  const store = fileStore();
  await store.usageLedger.insertBatch([row("erin"), row("erin")]);
  // Fail at once rather than wait, so a lock indexing should not need shows as an error.
  store.index.exec("PRAGMA busy_timeout = 0");
  store.db.exec("BEGIN IMMEDIATE");
  try {
    expect(indexTail(store.index)).toBe(2);
  } finally {
    store.db.exec("ROLLBACK");
  }
  expect(tailLength(store.index)).toBe(0);
});

test("a checkpoint through the index's connection copies the index's file alone, not the database attached to it", async () => {
  const store = fileStore();
  store.db.exec("PRAGMA wal_autocheckpoint = 0");
  const fileSize = () => statSync(store.db.filename).size;
  const before = fileSize();
  await store.usageLedger.insertBatch(Array.from({ length: 200 }, () => row("frank")));
  checkpoint(store.index);
  // The rows are still only in the database's WAL: its own connection's checkpoint copies them.
  expect(fileSize()).toBe(before);
  checkpoint(store.db);
  expect(fileSize()).toBeGreaterThan(before);
});

test("the thread indexes the tail and checkpoints; the serving connection stops checkpointing while it runs, and again when it stops", async () => {
  const store = fileStore();
  const autocheckpoint = () => store.db.query<{ wal_autocheckpoint: number }, []>("PRAGMA wal_autocheckpoint").get()!.wal_autocheckpoint;
  expect(autocheckpoint()).toBe(1000);
  store.maintenance!.start(memoryLogger());
  expect(autocheckpoint()).toBe(0);
  const rows = Array.from({ length: 300 }, (_, i) => row(`user-${i % 7}`));
  await store.usageLedger.insertBatch(rows);
  // The thread indexes a short tail within its `indexEveryMs` (ten seconds by default).
  for (let waited = 0; store.maintenance!.stats.indexedEntries < 300 && waited < 20_000; waited += 50) await Bun.sleep(50);
  expect(store.maintenance!.stats.indexedEntries).toBe(300);
  expect(tailLength(store.index)).toBe(0);
  for (let waited = 0; store.maintenance!.stats.checkpointedPages === 0 && waited < 20_000; waited += 50) await Bun.sleep(50);
  expect(store.maintenance!.stats.checkpointedPages).toBeGreaterThan(0);
  expect(ids(await listAll(store, "user-3", 50))).toEqual(ids(newestFirst(rows.filter((r) => r.appUserId === "user-3"))));
  await store.maintenance!.stop();
  expect(autocheckpoint()).toBe(1000);
  expect(store.maintenance!.stats.running).toBe(false);
});

test("a thread that fails hands checkpoints back to the serving connection and says so", async () => {
  const temp = tempDatabase();
  const store = openSqliteStore(temp.path);
  cleanups.push(temp.cleanup, () => store.close());
  // A path the thread cannot open: it fails as it starts.
  const maintenance = new SqliteMaintenance(store.db, {
    path: `${temp.dir}/no/such/folder/x.sqlite`,
    indexPath: `${temp.dir}/no/such/folder/x`,
    busyTimeoutMs: 100,
  });
  cleanups.push(() => maintenance.stop());
  const logger = memoryLogger();
  maintenance.start(logger);
  for (let waited = 0; maintenance.stats.failures === 0 && waited < 20_000; waited += 50) await Bun.sleep(50);
  expect(maintenance.stats.failures).toBeGreaterThan(0);
  expect(maintenance.stats.running).toBe(false);
  expect(store.db.query<{ wal_autocheckpoint: number }, []>("PRAGMA wal_autocheckpoint").get()!.wal_autocheckpoint).toBe(1000);
  expect(
    logger.lines.map((l) => JSON.parse(l) as { level: string; msg: string }).some((l) => l.level === "error" && l.msg.includes("maintenance thread failed")),
  ).toBe(true);
});

test("an index deleted (or a file from before it) is rebuilt from the ledger: until then every row is in the tail", async () => {
  const temp = tempDatabase();
  cleanups.push(temp.cleanup);
  const store = openSqliteStore(temp.path);
  const rows = [row("dave"), row("dave"), row(null)];
  await store.usageLedger.insertBatch(rows);
  await store.close();
  for (const suffix of ["", "-wal", "-shm"]) rmSync(userIndexPath(temp.path) + suffix, { force: true });
  const reopened = openSqliteStore(temp.path);
  const index = indexConnection(temp.path);
  cleanups.push(
    () => reopened.close(),
    () => index.close(),
  );
  expect(tailLength(index)).toBe(3);
  expect(ids(await listAll(reopened, "dave", 1))).toEqual(ids(newestFirst(rows.slice(0, 2))));
  expect(indexTail(index, 2)).toBe(2);
  expect(tailLength(index)).toBe(1);
  expect(ids(await listAll(reopened, "dave", 1))).toEqual(ids(newestFirst(rows.slice(0, 2))));
});
