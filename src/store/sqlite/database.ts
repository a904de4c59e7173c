import { Database } from "bun:sqlite";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { migrate } from "./migrations";

/**
 * Opens (creating if needed) the SQLite file, in WAL mode so readers never block the
 * usage writer, and applies pending migrations. `:memory:` gives a private database.
 */
export function openDatabase(path: string): Database {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path, { create: true, strict: true });
  db.exec("PRAGMA journal_mode = WAL");
  // NORMAL is durable across process crashes in WAL mode; only an OS crash can lose the
  // last transactions: at most the last flush interval of ledger rows, a loss we accept
  // for not waiting on fsync at every commit.
  db.exec("PRAGMA synchronous = NORMAL");
  // The CLI and a running server share the file: wait for the other's lock, don't fail.
  db.exec("PRAGMA busy_timeout = 5000");
  db.exec("PRAGMA foreign_keys = ON");
  migrate(db);
  return db;
}
