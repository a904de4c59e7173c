/**
 * The SQLite file's upkeep off the event loop (src/store/sqlite/maintenance.ts): the ledger's
 * per-user index written late and sorted by a thread of its own, checkpoints there too, and
 * readers that see every row whether the thread has reached it or not.
 */
import { afterEach, expect, setDefaultTimeout, test } from "bun:test";
import { Database } from "bun:sqlite";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite";
import { SqliteMaintenance } from "../../src/store/sqlite/maintenance";
import { indexTail, tailLength } from "../../src/store/sqlite/maintenance-worker";
import { HOLDER, MAINTENANCE, WAITING, WriteTurns } from "../../src/store/sqlite/write-turns";
import { memoryLogger } from "../../src/logger";
import { userAccount } from "../../src/budget/accounts";
import type { UsageRow } from "../../src/budget/usage-row";
import { tempDatabase } from "../helpers/server";

setDefaultTimeout(30_000);

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function fileStore(): SqliteStore {
  const temp = tempDatabase();
  const store = openSqliteStore(temp.path);
  cleanups.push(temp.cleanup, () => store.close());
  return store;
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
  expect(tailLength(store.db)).toBe(5);
  expect(ids(await listAll(store, "alice", 2))).toEqual(ids(newestFirst(alice)));

  // Indexed (grant rows have no user, so no entry): the tail is empty.
  expect(indexTail(store.db, 2)).toBe(4);
  expect(tailLength(store.db)).toBe(0);
  expect(ids(await listAll(store, "alice", 2))).toEqual(ids(newestFirst(alice)));

  // More rows: some indexed, some in the tail; a cursor pages across the boundary.
  const more = [row("alice"), row("alice")];
  await store.usageLedger.insertBatch(more);
  expect(ids(await listAll(store, "alice", 2))).toEqual(ids(newestFirst([...alice, ...more])));
  expect(ids(await listAll(store, "bob", 10))).toHaveLength(1);
});

test("a row both indexed and still in the tail (the mark moves with a tail's last transaction) is listed once", async () => {
  const store = fileStore();
  const rows = [row("carol"), row("carol"), row("carol")];
  await store.usageLedger.insertBatch(rows);
  // As the thread leaves it between two transactions of one tail: entries written, mark not moved.
  store.db.exec("INSERT INTO usage_ledger_by_user SELECT app_id, app_user_id, period, started_at, request_id FROM usage_ledger");
  expect(tailLength(store.db)).toBe(3);
  expect(ids(await listAll(store, "carol", 2))).toEqual(ids(newestFirst(rows)));
  // Indexing that tail again writes nothing twice.
  indexTail(store.db, 1);
  expect(store.db.query<{ n: number }, []>("SELECT count(*) AS n FROM usage_ledger_by_user").get()!.n).toBe(3);
});

test("the thread indexes the tail and checkpoints; the serving connection stops checkpointing while it runs, and again when it stops", async () => {
  const store = fileStore();
  const autocheckpoint = () => store.db.query<{ wal_autocheckpoint: number }, []>("PRAGMA wal_autocheckpoint").get()!.wal_autocheckpoint;
  expect(autocheckpoint()).toBe(1000);
  store.maintenance!.start(memoryLogger());
  expect(autocheckpoint()).toBe(0);
  const rows = Array.from({ length: 300 }, (_, i) => row(`user-${i % 7}`));
  await store.usageLedger.insertBatch(rows);
  // The thread indexes a short tail within its `indexEveryMs` (one second by default).
  for (let waited = 0; tailLength(store.db) > 0 && waited < 20_000; waited += 50) await Bun.sleep(50);
  expect(tailLength(store.db)).toBe(0);
  expect(store.maintenance!.stats.indexedEntries).toBe(300);
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
  const maintenance = new SqliteMaintenance(store.db, { path: `${temp.dir}/no/such/folder/x.sqlite`, busyTimeoutMs: 100 });
  cleanups.push(() => maintenance.stop());
  const logger = memoryLogger();
  maintenance.start(logger);
  for (let waited = 0; maintenance.stats.failures === 0 && waited < 20_000; waited += 50) await Bun.sleep(50);
  expect(maintenance.stats.failures).toBeGreaterThan(0);
  expect(maintenance.stats.running).toBe(false);
  expect(store.db.query<{ wal_autocheckpoint: number }, []>("PRAGMA wal_autocheckpoint").get()!.wal_autocheckpoint).toBe(1000);
  expect(logger.lines.map((l) => JSON.parse(l) as { level: string; msg: string }).some((l) => l.level === "error" && l.msg.includes("maintenance thread failed"))).toBe(true);
});

test("write turns: the serving thread waits while the thread writes, and lets a waiting thread go first", async () => {
  const turns = new WriteTurns();
  const release = await turns.take();
  expect(Atomics.load(turns.cells, HOLDER)).not.toBe(0);
  release();

  // The thread holds its turn: the serving thread's take resolves only once it is given back.
  Atomics.store(turns.cells, HOLDER, MAINTENANCE);
  let taken = false;
  const waiting = turns.take().then((r) => {
    taken = true;
    return r;
  });
  await Bun.sleep(20);
  expect(taken).toBe(false);
  Atomics.store(turns.cells, HOLDER, 0);
  Atomics.notify(turns.cells, HOLDER);
  (await waiting)();
  expect(taken).toBe(true);

  // A waiting thread: the serving thread holds back until the thread has taken its turn.
  Atomics.store(turns.cells, WAITING, 1);
  let second = false;
  const next = turns.take().then((r) => {
    second = true;
    return r;
  });
  await Bun.sleep(20);
  expect(second).toBe(false);
  Atomics.store(turns.cells, WAITING, 0);
  Atomics.notify(turns.cells, WAITING);
  (await next)();
  expect(second).toBe(true);
});

test("a file from before the change gets its users' entries when migrated", async () => {
  const temp = tempDatabase();
  cleanups.push(temp.cleanup);
  const store = openSqliteStore(temp.path);
  const rows = [row("dave"), row("dave"), row(null)];
  await store.usageLedger.insertBatch(rows);
  // Back to how version 11 left it: the index in the row's table, no entries table.
  store.db.exec(`
    DROP TABLE usage_ledger_by_user; DROP TABLE usage_ledger_by_user_mark; DROP INDEX usage_ledger_by_app_time;
    CREATE INDEX usage_ledger_by_user ON usage_ledger(app_id, app_user_id, period, started_at);
    DELETE FROM schema_migrations WHERE version = 12;`);
  store.db.close();
  const reopened = openSqliteStore(temp.path);
  cleanups.push(() => reopened.close());
  const db: Database = reopened.db;
  expect(db.query<{ n: number }, []>("SELECT count(*) AS n FROM usage_ledger_by_user").get()!.n).toBe(2);
  expect(tailLength(db)).toBe(0);
});
