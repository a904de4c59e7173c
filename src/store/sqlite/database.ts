import { Database, SQLiteError } from "bun:sqlite";
import { dirname } from "node:path";
import { migrate } from "./migrations";
import { createPrivateFile, ensurePrivateFolder, tightenFile } from "../../secrets/private-files";

/**
 * Opens (creating if needed) the SQLite file, in WAL mode so readers never block the
 * usage writer, and applies pending migrations. `:memory:` gives a private database.
 */
export function openDatabase(path: string): Database {
  if (path !== ":memory:") {
    // 0600 before SQLite opens it (an empty file is a new database to SQLite), 0700 folder:
    // the file holds what the service keeps (src/secrets/private-files.ts).
    ensurePrivateFolder(dirname(path), [path]);
    createPrivateFile(path);
  }
  const db = new Database(path, { create: true, strict: true });
  // Before any statement: processes sharing the file (the CLI and a server, servers beside
  // one Redis) wait for each other's lock, don't fail. The switch to WAL below takes the
  // lock too, while another process may be creating or migrating the file.
  db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  switchToWal(db, "main");
  // New ones take the database's mode; these tighten the ones an older version left loose.
  if (path !== ":memory:") for (const sidecar of ["-wal", "-shm"]) tightenFile(path + sidecar);
  // NORMAL is durable across process crashes in WAL mode; only an OS crash can lose the
  // last transactions: at most the last flush interval of ledger rows, a loss we accept
  // for not waiting on fsync at every commit.
  db.exec("PRAGMA synchronous = NORMAL");
  db.exec("PRAGMA foreign_keys = ON");
  migrate(db);
  return db;
}

export const BUSY_TIMEOUT_MS = 5000;

/**
 * SQLite answers SQLITE_BUSY at once, without waiting in its busy handler, where waiting
 * could deadlock; switching a new file to WAL while another process opens it is such a
 * case (seen in the suite: two processes creating one file, one failing with "database is
 * locked" despite the busy timeout). So the switch itself is retried, within the same bound.
 */
export function switchToWal(db: Database, schema = "main"): void {
  const deadline = performance.now() + BUSY_TIMEOUT_MS;
  for (;;) {
    try {
      db.exec(`PRAGMA ${schema}.journal_mode = WAL`);
      return;
    } catch (err) {
      if (!(err instanceof SQLiteError && err.code === "SQLITE_BUSY") || performance.now() > deadline) throw err;
      Bun.sleepSync(5);
    }
  }
}

/**
 * Runs `write`, which replaces or deletes a secret (sealing one an older version kept in
 * clear, a key rotation, a reset), so that the old value leaves the files: SQLite's
 * secure_delete zeroes the freed cell instead of leaving it in the page's free space, and a
 * TRUNCATE checkpoint copies the page into the database file over its old image and empties
 * the WAL, whose earlier frames may hold it. Rare writes, so the checkpoint's cost is no
 * concern. A reader of another process holding an old snapshot can keep the checkpoint
 * from finishing; the next one (SQLite's automatic checkpoints) does.
 */
export function scrubbingWrite<T>(db: Database, write: () => T): T {
  db.exec("PRAGMA secure_delete = ON");
  try {
    return write();
  } finally {
    db.exec("PRAGMA secure_delete = OFF");
    db.query("PRAGMA wal_checkpoint(TRUNCATE)").get();
  }
}
