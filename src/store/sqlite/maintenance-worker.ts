/**
 * The SQLite file's upkeep, run in a thread of its own with its own connection
 * (./maintenance.ts starts it), so that none of it runs on the event loop:
 *
 * - **Checkpoints.** The serving connection does not checkpoint (`wal_autocheckpoint = 0`):
 *   a checkpoint copies the WAL's pages into the database file and waits for `fsync`, which
 *   took 3.5–10.5 ms of the event loop at a time. Here a PASSIVE checkpoint runs every
 *   interval; it never takes the write lock, so writers go on meanwhile.
 * - **The per-user index of the usage ledger.** A ledger row is found by user through
 *   `usage_ledger_by_user`, a table kept apart from the row (migration 12). With many users
 *   an index entry written with its row touches one page per user per transaction, which
 *   made the ledger's writes seven times slower at 1,000 users than at one. So the entries
 *   are written here, late and sorted: every row past `usage_ledger_by_user_mark.upto` (its
 *   rowid) is the *tail*, read back in index order and written in short transactions, each
 *   filling a user's page with many entries at once. Readers add the tail to what the index
 *   finds (src/store/sqlite/usage-ledger.ts), so a row is listed from its commit on, indexed
 *   or not. Rowids only grow: ledger rows are never deleted.
 *
 * This file is loaded as the thread's source text (`with { type: "text" }`), so it imports
 * nothing but `bun:sqlite`. Its functions are exported for the tests, which run them on a
 * file of their own.
 */
import { Database } from "bun:sqlite";

export interface MaintenanceSettings {
  /** The database file (never `:memory:`, which no other connection can open). */
  path: string;
  /** How often the thread looks for work. */
  intervalMs: number;
  /** A tail this long is indexed at once; a shorter one waits up to `indexEveryMs`. */
  indexAtRows: number;
  indexEveryMs: number;
  /** Entries per write transaction: how long the write lock is held at a time (about 1 ms per 300 entries). */
  entriesPerTransaction: number;
  /**
   * How often a checkpoint runs. A page written many times between two checkpoints (a
   * user's index page, the totals) is copied to the database file once.
   */
  checkpointEveryMs: number;
  busyTimeoutMs: number;
}

/** The cells of ./write-turns.ts (its protocol, this thread's side: it imports nothing). */
const HOLDER = 0;
const WAITING = 1;
const FREE = 0;
const MAINTENANCE = 2;

/** The longest this thread keeps the write lock from the serving thread at a time. */
const TURN_MS = 4;

/** Blocks this thread (never the event loop) until it is its turn at the write lock. */
function takeTurn(cells: Int32Array): void {
  Atomics.store(cells, WAITING, 1);
  for (;;) {
    const holder = Atomics.compareExchange(cells, HOLDER, FREE, MAINTENANCE);
    if (holder === FREE) break;
    Atomics.wait(cells, HOLDER, holder, 50);
  }
  Atomics.store(cells, WAITING, 0);
  Atomics.notify(cells, WAITING);
}

function giveTurn(cells: Int32Array): void {
  Atomics.store(cells, HOLDER, FREE);
  Atomics.notify(cells, HOLDER);
}

/** What the thread tells the service: after each round, and of each failure. */
export type MaintenanceReport =
  | { kind: "round"; indexed: number; checkpointedPages: number; walPages: number }
  | { kind: "error"; message: string }
  | { kind: "stopped" };

/** Entries per INSERT statement: a statement's own cost is most of an entry's (as for ledger rows). */
const ENTRIES_PER_INSERT = 100;
const ENTRY = "(?, ?, ?, ?, ?)";

type Entry = [appId: string, appUserId: string, period: string, startedAt: number, requestId: string];

/** Rows written since the index last caught up: how far the readers' scan of the tail reaches. */
export function tailLength(db: Database): number {
  const row = db.query<{ tail: number }, []>("SELECT COALESCE(max(rowid), 0) - (SELECT upto FROM usage_ledger_by_user_mark) AS tail FROM usage_ledger").get();
  return Math.max(0, row?.tail ?? 0);
}

/**
 * Writes the index entries of the tail as it is now, sorted, `perTransaction` at a time; the
 * last transaction moves the mark past it. Another process's thread may index the same tail
 * at once (servers sharing one file beside Redis): an entry is written once (OR IGNORE), and
 * the mark only moves forward. Returns the entries written.
 */
export function indexTail(db: Database, perTransaction: number, turns?: Int32Array): number {
  const { upto, last } = db
    .query<{ upto: number; last: number }, []>("SELECT upto, (SELECT COALESCE(max(rowid), 0) FROM usage_ledger) AS last FROM usage_ledger_by_user_mark")
    .get()!;
  if (last <= upto) return 0;
  // A reader's snapshot: no lock held while the tail is read and sorted.
  const entries = db
    .query<Entry, [number, number]>(
      `SELECT app_id, app_user_id, period, started_at, request_id FROM usage_ledger
       WHERE rowid > ? AND rowid <= ? AND app_user_id IS NOT NULL ORDER BY 1, 2, 3, 4, 5`,
    )
    .values(upto, last) as Entry[];
  const moveMark = db.query("UPDATE usage_ledger_by_user_mark SET upto = max(upto, ?)");
  const transaction = db.transaction((part: Entry[], isLast: boolean) => {
    for (let at = 0; at < part.length; at += ENTRIES_PER_INSERT) {
      const slice = part.slice(at, at + ENTRIES_PER_INSERT);
      insertStatement(db, slice.length).run(...slice.flat());
    }
    if (isLast) moveMark.run(last);
  });
  // One turn lasts up to TURN_MS of transactions: handing the lock over after each would
  // have this thread wait out one of the serving thread's batches per transaction.
  let turnStarted = -1;
  const write = (part: Entry[], isLast: boolean) => {
    if (turns && turnStarted < 0) {
      takeTurn(turns);
      turnStarted = performance.now();
    }
    let failed = true;
    try {
      transaction.immediate(part, isLast);
      failed = false;
    } finally {
      if (turns && (failed || isLast || performance.now() - turnStarted >= TURN_MS)) {
        giveTurn(turns);
        turnStarted = -1;
      }
    }
  };
  if (entries.length === 0) write([], true);
  for (let at = 0; at < entries.length; at += perTransaction) {
    write(entries.slice(at, at + perTransaction), at + perTransaction >= entries.length);
  }
  return entries.length;
}

const inserts = new WeakMap<Database, Map<number, ReturnType<Database["query"]>>>();

function insertStatement(db: Database, entries: number) {
  let byCount = inserts.get(db);
  if (!byCount) inserts.set(db, (byCount = new Map()));
  let statement = byCount.get(entries);
  if (!statement) {
    statement = db.query(`INSERT OR IGNORE INTO usage_ledger_by_user (app_id, app_user_id, period, started_at, request_id) VALUES ${Array.from({ length: entries }, () => ENTRY).join(", ")}`);
    byCount.set(entries, statement);
  }
  return statement;
}

/**
 * A PASSIVE checkpoint: copies what no reader still needs, waits for nobody. Returns the
 * WAL's length in pages and how many of them are now in the database file.
 */
export function checkpoint(db: Database): { walPages: number; checkpointedPages: number } {
  const result = db.query<{ log: number; checkpointed: number }, []>("PRAGMA wal_checkpoint(PASSIVE)").get();
  return { walPages: Math.max(0, result?.log ?? 0), checkpointedPages: Math.max(0, result?.checkpointed ?? 0) };
}

/** The thread's loop: one round per interval until told to stop. */
function runThread(settings: MaintenanceSettings, turns: Int32Array, post: (report: MaintenanceReport) => void): () => void {
  const db = new Database(settings.path, { strict: true });
  db.exec(`PRAGMA busy_timeout = ${settings.busyTimeoutMs}`);
  let stopped = false;
  let lastIndexedAt = 0;
  let lastCheckpointAt = 0;
  let timer: ReturnType<typeof setTimeout> | null = null;
  const round = () => {
    timer = null;
    if (stopped) return;
    try {
      let indexed = 0;
      const tail = tailLength(db);
      const now = performance.now();
      if (tail >= settings.indexAtRows || (tail > 0 && now - lastIndexedAt >= settings.indexEveryMs)) {
        indexed = indexTail(db, settings.entriesPerTransaction, turns);
        lastIndexedAt = now;
      }
      let pages = { walPages: 0, checkpointedPages: 0 };
      if (now - lastCheckpointAt >= settings.checkpointEveryMs) {
        pages = checkpoint(db);
        lastCheckpointAt = now;
      }
      post({ kind: "round", indexed, ...pages });
    } catch (err) {
      post({ kind: "error", message: err instanceof Error ? err.message : String(err) });
    }
    timer = setTimeout(round, settings.intervalMs);
  };
  round();
  return () => {
    stopped = true;
    if (timer !== null) clearTimeout(timer);
    try {
      checkpoint(db);
    } catch {
      // The service's next start checkpoints what is left; nothing is lost.
    }
    db.close();
    post({ kind: "stopped" });
  };
}

/** The thread's own global scope (the project's types describe the service's, which has no `onmessage`). */
declare const self: { onmessage: ((event: MessageEvent<{ start: MaintenanceSettings; turns: Int32Array } | { stop: true }>) => void) | null };

if (!Bun.isMainThread) {
  let stop: (() => void) | null = null;
  self.onmessage = (event: MessageEvent<{ start: MaintenanceSettings; turns: Int32Array } | { stop: true }>) => {
    const message = event.data;
    if ("start" in message && stop === null) stop = runThread(message.start, message.turns, (report) => postMessage(report));
    else if ("stop" in message && stop !== null) stop();
  };
}
