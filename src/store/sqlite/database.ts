import { Database, SQLiteError } from "bun:sqlite";
import { dirname } from "node:path";
import { migrate } from "./migrations";
import { createPrivateFile, ensurePrivateFolder, tightenFile } from "../../secrets/private-files";

/**
 * How long a commit waits for the disk (SQLITE_SYNCHRONOUS). `normal`: a commit is durable
 * across a crash of the process (its WAL frames are in the OS's hands), and an OS crash or a
 * power cut can lose the last commits since the WAL was last synced (at each checkpoint):
 * ledger rows, and reservations' journal entries of calls already sent upstream. `full`:
 * every commit syncs the WAL first, so neither can lose a committed call, at the cost of an
 * fsync per commit (the usage writer and the journal commit once per event-loop turn).
 */
export type SqliteSynchronous = "normal" | "full";

/**
 * Opens (creating if needed) the SQLite file, in WAL mode so readers never block the
 * usage writer, and applies pending migrations. `:memory:` gives a private database.
 */
export function openDatabase(path: string, synchronous: SqliteSynchronous = "normal"): Database {
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
  // See SqliteSynchronous: NORMAL survives the process, FULL the machine too.
  db.exec(`PRAGMA synchronous = ${synchronous === "full" ? "FULL" : "NORMAL"}`);
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
