/**
 * One embedded server per SQLite file. In embedded mode (no REDIS_URL) the live budget
 * counters and rate-limit windows live in the process's memory, so two processes on one
 * file would each let a user spend up to the cap: the hard cap of ARCHITECTURE.md §3 holds only
 * if exactly one process serves the file. Several processes share their counters through
 * REDIS_URL instead, and take no lock.
 *
 * The lock is a sidecar SQLite file `<database>.lock`, held in an exclusive transaction for
 * the life of the process. SQLite locks with POSIX fcntl() record locks, which the kernel
 * drops when the process ends however it ends (SIGKILL, OOM kill, crash): a dead owner never
 * leaves a stale lock, and no pid file needs cleaning up. The database file itself is not
 * locked, so the operator CLI keeps working against the same DATABASE_URL while the
 * server runs (ARCHITECTURE.md §4).
 */
import { Database } from "bun:sqlite";
import { dirname, resolve } from "node:path";
import { createPrivateFile, ensurePrivateFolder } from "../secrets/private-files";

/** Another process holds the lock of this database: this one must not serve it. */
export class StoreLockedError extends Error {
  constructor(
    readonly lockPath: string,
    readonly databasePath: string,
  ) {
    super(
      `store is locked: another process holds the lock file ${lockPath} of the database ${databasePath}. ` +
        "Embedded mode (no REDIS_URL) serves a database from one process only, because budgets and rate limits are counted in that process's memory. " +
        "Stop the other process, or point this one at another DATABASE_URL; to run several processes on one database, set the same REDIS_URL on all of them.",
    );
    this.name = "StoreLockedError";
  }
}

export interface StoreLock {
  readonly lockPath: string;
  /** Releases the lock (also released by the OS when the process ends). */
  release(): void;
}

/**
 * Held handles: a Database that is garbage-collected is closed by its finalizer, which would
 * drop the lock while the server still runs. This module-level set keeps them reachable.
 */
const held = new Set<Database>();

/** Takes the lock of `databasePath` for the life of the process; throws StoreLockedError if another process has it. */
export function acquireStoreLock(databasePath: string): StoreLock {
  const absolute = resolve(databasePath);
  const lockPath = `${absolute}.lock`;
  ensurePrivateFolder(dirname(lockPath), [absolute]);
  createPrivateFile(lockPath);
  const db = new Database(lockPath, { create: true });
  try {
    // Fail at once instead of waiting: the owner holds it until it exits.
    db.exec("PRAGMA busy_timeout = 0");
    // No `-journal` file beside the lock: the transaction never writes anything.
    db.exec("PRAGMA journal_mode = MEMORY");
    db.exec("PRAGMA locking_mode = EXCLUSIVE");
    // Takes SQLite's EXCLUSIVE lock (an fcntl write lock on the file) and never ends.
    db.exec("BEGIN EXCLUSIVE");
  } catch (err) {
    db.close();
    if (isBusy(err)) throw new StoreLockedError(lockPath, absolute);
    throw err;
  }
  held.add(db);
  return {
    lockPath,
    release() {
      if (!held.delete(db)) return;
      db.close();
    },
  };
}

function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"));
}
