/**
 * The SQLite file's upkeep, run in a thread of its own (./maintenance.ts starts it), so that
 * none of it runs on the event loop:
 *
 * - **The per-user index of the usage ledger** (./user-index.ts, a file of its own): every
 *   row past the mark is copied into the index in index order, so that a user's page takes
 *   many entries at once, by one statement inside SQLite (the index's connection attaches
 *   the database to read it), in one transaction that also moves the mark. Readers add the
 *   tail to what the index finds, so a row is listed from its commit on, indexed or not.
 *   Rowids only grow: ledger rows are never deleted.
 * - **Checkpoints** of both files. The serving connection does not checkpoint
 *   (`wal_autocheckpoint = 0`): a checkpoint copies the WAL's pages into the database file
 *   and waits for `fsync`, which took 3.5–10.5 ms of the event loop at a time. A PASSIVE
 *   checkpoint never takes the write lock, so writers go on meanwhile. But it copies only
 *   what no reader still needs, and the WAL starts over from its beginning only after a
 *   checkpoint that copied everything: under steady load, with the serving thread's reads
 *   always under way, that seldom happened, and the soak's WAL grew to 48 MB (it had stayed
 *   under 4.1 MB when the serving connection checkpointed after its own commits). So an
 *   incomplete checkpoint is tried again the next round, and a WAL past `restartAtPages`
 *   gets a RESTART checkpoint, which waits for the readers of the moment (a busy wait here,
 *   in this thread; the serving thread's writes wait for it meanwhile, a few milliseconds)
 *   so that the WAL starts over.
 *
 * Two connections: the database's, which only checkpoints, and the index's, which writes
 * the index and reads the database attached to it (`attachLedger`). So this thread never
 * holds the database's write lock, and its commits do not look like another writer's to the
 * serving connection's change feed.
 *
 * This file is loaded as the thread's source text (`with { type: "text" }`), so it imports
 * nothing but `bun:sqlite`. Its functions are exported for the tests, which run them on a
 * file of their own.
 */
import { Database } from "bun:sqlite";

export interface MaintenanceSettings {
  /** The database file (never `:memory:`, which no other connection can open). */
  path: string;
  /** Its per-user index's file (./user-index.ts). */
  indexPath: string;
  /** How often the thread looks for work. */
  intervalMs: number;
  /** A tail this long is indexed at once; a shorter one waits up to `indexEveryMs`. */
  indexAtRows: number;
  /** The most rows one pass reads (an upgraded or rebuilt index starts with the whole ledger as its tail). */
  indexAtMostRows: number;
  indexEveryMs: number;
  /**
   * How often a checkpoint runs. A page written many times between two checkpoints (a
   * user's index page, the totals) is copied to the database file once.
   */
  checkpointEveryMs: number;
  /** A WAL this long (in pages) is made to start over (a RESTART checkpoint). */
  restartAtPages: number;
  busyTimeoutMs: number;
}

/** What the thread tells the service: after each round, and of each failure. */
export type MaintenanceReport =
  { kind: "round"; indexed: number; checkpointedPages: number; walPages: number } | { kind: "error"; message: string } | { kind: "stopped" };

/** The schema name under which the index's connection reads the database (`attachLedger`). */
const LEDGER = "ledger";

/** Lets the index's connection read the ledger, so that `indexTail` copies entries inside SQLite. */
export function attachLedger(index: Database, ledgerPath: string): void {
  index.query(`ATTACH DATABASE ? AS ${LEDGER}`).run(ledgerPath);
}

/** Rows written since the index last caught up: how far the readers' scan of the tail reaches. */
export function tailLength(index: Database): number {
  return Math.max(0, newestRow(index) - markOf(index));
}

const markOf = (index: Database) => index.query<{ upto: number }, []>("SELECT upto FROM main.usage_ledger_by_user_mark").get()!.upto;
const newestRow = (index: Database) => index.query<{ last: number }, []>(`SELECT COALESCE(max(rowid), 0) AS last FROM ${LEDGER}.usage_ledger`).get()!.last;

/**
 * Writes the index entries of the tail as it is now (at most `atMostRows` rows of it), in
 * index order, and moves the mark past it, in one transaction of the index's file. `index`
 * has the ledger attached (`attachLedger`). Another process's thread may index the same tail
 * at once (servers sharing one file beside Redis): an entry is written once (OR IGNORE), and
 * the mark only moves forward. Returns the entries written.
 *
 * One INSERT ... SELECT, not the rows read into JavaScript and written back 100 to a
 * statement: 1.74 against 2.3 µs of CPU per entry (ARCHITECTURE.md §7 "Per-user index
 * apart"). How the locks fall:
 * - DEFERRED, not IMMEDIATE, which would take the write lock of every attached file, the
 *   database's too, which the serving connection must never wait for.
 * - The INSERT is the transaction's first statement, and reads the mark itself: a write
 *   statement takes the index's write lock before it reads (waiting for another process's
 *   thread under `busy_timeout`). Had a read of the mark come first, a commit by that thread
 *   in between would fail the upgrade to writing at once (SQLITE_BUSY_SNAPSHOT).
 * - The mark's update reads the ledger's newest row in the snapshot the INSERT read, which
 *   the transaction holds to its end.
 * - The index's write lock is held for the whole tail (about 30 ms for 16,384 entries); only
 *   another process's thread waits for it, never a reader (WAL).
 */
export function indexTail(index: Database, atMostRows = Number.MAX_SAFE_INTEGER): number {
  const write = index.transaction(() => {
    const { changes } = index.query(COPY_TAIL).run(atMostRows);
    index.query(MOVE_MARK).run(atMostRows);
    return changes;
  });
  return write.deferred() as number;
}

const MARK = "(SELECT upto FROM main.usage_ledger_by_user_mark)";

const COPY_TAIL = `
  INSERT OR IGNORE INTO main.usage_ledger_by_user (app_id, app_user_id, period, started_at, request_id)
  SELECT app_id, app_user_id, period, started_at, request_id FROM ${LEDGER}.usage_ledger
  WHERE rowid > ${MARK} AND rowid <= ${MARK} + ?1 AND app_user_id IS NOT NULL ORDER BY 1, 2, 3, 4, 5`;

const MOVE_MARK = `
  UPDATE main.usage_ledger_by_user_mark
  SET upto = max(upto, min(upto + ?1, (SELECT COALESCE(max(rowid), 0) FROM ${LEDGER}.usage_ledger)))`;

/**
 * A PASSIVE checkpoint: copies what no reader still needs, waits for nobody. Returns the
 * WAL's length in pages and how many of them are now in the database file.
 */
export function checkpoint(db: Database, mode: "PASSIVE" | "RESTART" = "PASSIVE"): { walPages: number; checkpointedPages: number } {
  // `main.`: without a schema the pragma checkpoints every attached file, and the index's
  // connection has the database attached (`attachLedger`), which its own connection checkpoints.
  const result = db.query<{ log: number; checkpointed: number }, []>(`PRAGMA main.wal_checkpoint(${mode})`).get();
  return { walPages: Math.max(0, result?.log ?? 0), checkpointedPages: Math.max(0, result?.checkpointed ?? 0) };
}

/** The thread's loop: one round per interval (at once again while a long tail is left) until told to stop. */
function runThread(settings: MaintenanceSettings, post: (report: MaintenanceReport) => void): () => void {
  const open = (path: string) => {
    const db = new Database(path, { strict: true });
    db.exec(`PRAGMA busy_timeout = ${settings.busyTimeoutMs}`);
    return db;
  };
  const ledger = open(settings.path);
  const index = open(settings.indexPath);
  index.exec("PRAGMA synchronous = NORMAL");
  attachLedger(index, settings.path);
  let stopped = false;
  let lastIndexedAt = 0;
  let lastCheckpointAt = 0;
  let checkpointIncomplete = false;
  let timer: ReturnType<typeof setTimeout> | null = null;
  const round = () => {
    timer = null;
    if (stopped) return;
    let more = false;
    try {
      let indexed = 0;
      const tail = tailLength(index);
      const now = performance.now();
      if (tail >= settings.indexAtRows || (tail > 0 && now - lastIndexedAt >= settings.indexEveryMs)) {
        indexed = indexTail(index, settings.indexAtMostRows);
        lastIndexedAt = now;
        more = tail > settings.indexAtMostRows;
      }
      let pages = { walPages: 0, checkpointedPages: 0 };
      if (checkpointIncomplete || now - lastCheckpointAt >= settings.checkpointEveryMs) {
        pages = checkpoint(ledger);
        if (pages.walPages >= settings.restartAtPages) pages = checkpoint(ledger, "RESTART");
        checkpoint(index);
        checkpointIncomplete = pages.checkpointedPages < pages.walPages;
        lastCheckpointAt = now;
      }
      // Idle rounds say nothing: ten messages a second would each be a task on the event loop.
      if (indexed > 0 || pages.walPages > 0) post({ kind: "round", indexed, ...pages });
    } catch (err) {
      post({ kind: "error", message: err instanceof Error ? err.message : String(err) });
    }
    timer = setTimeout(round, more ? 0 : settings.intervalMs);
  };
  round();
  return () => {
    stopped = true;
    if (timer !== null) clearTimeout(timer);
    try {
      checkpoint(ledger);
      checkpoint(index);
    } catch {
      // The service's next start checkpoints what is left; nothing is lost.
    }
    ledger.close();
    index.close();
    post({ kind: "stopped" });
  };
}

/** The thread's own global scope (the project's types describe the service's, which has no `onmessage`). */
declare const self: { onmessage: ((event: MessageEvent<{ start: MaintenanceSettings } | { stop: true }>) => void) | null };

if (!Bun.isMainThread) {
  let stop: (() => void) | null = null;
  self.onmessage = (event: MessageEvent<{ start: MaintenanceSettings } | { stop: true }>) => {
    const message = event.data;
    if ("start" in message && stop === null) stop = runThread(message.start, (report) => postMessage(report));
    else if ("stop" in message && stop !== null) stop();
  };
}
