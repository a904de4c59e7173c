import { Database } from "bun:sqlite";
import { createPrivateFile, tightenFile } from "../../secrets/private-files";
import { BUSY_TIMEOUT_MS, switchToWal } from "./database";

/**
 * The usage ledger's per-user index, kept in a file of its own beside the database: the
 * entries (app, user, period, start, request id) by which a user's rows are listed, and the
 * mark: the rowid of the last ledger row whose entry is written. Rows past the mark are the
 * *tail*, which readers scan (src/store/sqlite/usage-ledger.ts).
 *
 * Why apart from the rows:
 * - With many users, an entry written with its row touches one page per user per
 *   transaction: the ledger's writes were seven times slower at 1,000 users than at one.
 *   The maintenance thread (./maintenance-worker.ts) writes them late and sorted instead, so
 *   a user's page takes many entries per write.
 * - The thread writes through a connection of its own. In the database's own file its
 *   commits would change `PRAGMA data_version`, by which the serving connection learns of
 *   writes from elsewhere (./change-feed.ts) and empties its read cache, and they would
 *   contend with the serving connection for the write lock. In this file they do neither.
 *   For the same reason the serving connection does not attach it (BEGIN IMMEDIATE would
 *   lock every attached file): a reading connection of its own does.
 * - It is derived data: deleted, it is rebuilt from the ledger (its mark starts at 0).
 *
 * Measured: ARCHITECTURE.md §7 "Per-user index apart".
 */
export const USER_INDEX_SCHEMA = "user_index";

export function userIndexPath(databasePath: string): string {
  return `${databasePath}-user-index`;
}

/**
 * The connection that lists a user's rows: the database's, with the index attached. For
 * `:memory:` that is `db` itself, with a private index nobody else writes (no thread runs).
 */
export function openUserIndexReader(db: Database, databasePath: string): Database {
  if (databasePath === ":memory:") {
    db.exec(`ATTACH DATABASE ':memory:' AS ${USER_INDEX_SCHEMA}`);
    createTables(db, `${USER_INDEX_SCHEMA}.`);
    return db;
  }
  const indexPath = userIndexPath(databasePath);
  prepareIndexFile(indexPath);
  const reader = new Database(databasePath, { strict: true });
  reader.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  reader.query(`ATTACH DATABASE ? AS ${USER_INDEX_SCHEMA}`).run(indexPath);
  return reader;
}

/** Creates the index's file (0600, WAL) and its tables, as every process does the same way. */
function prepareIndexFile(indexPath: string): void {
  createPrivateFile(indexPath);
  const index = new Database(indexPath, { create: true, strict: true });
  try {
    index.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
    switchToWal(index);
    for (const sidecar of ["-wal", "-shm"]) tightenFile(indexPath + sidecar);
    createTables(index, "");
  } finally {
    index.close();
  }
}

function createTables(db: Database, schema: string): void {
  // IF NOT EXISTS: every process creates them the same way, and a deleted file is rebuilt.
  db.exec(`
    CREATE TABLE IF NOT EXISTS ${schema}usage_ledger_by_user (
      app_id       TEXT NOT NULL,
      app_user_id  TEXT NOT NULL,
      period       TEXT NOT NULL,
      started_at   INTEGER NOT NULL,
      request_id   TEXT NOT NULL,
      PRIMARY KEY (app_id, app_user_id, period, started_at, request_id)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS ${schema}usage_ledger_by_user_mark (
      id    INTEGER PRIMARY KEY CHECK (id = 1),
      upto  INTEGER NOT NULL
    );
    INSERT OR IGNORE INTO ${schema}usage_ledger_by_user_mark (id, upto) VALUES (1, 0);
  `);
}
