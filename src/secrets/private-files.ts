/**
 * The store's files are readable by the service's user only (ARCHITECTURE.md §3
 * "Secrets at rest"): the database and its `-wal`/`-shm`, its ledger's per-user index (`-user-index`,
 * src/store/sqlite/user-index.ts) and that one's, the process lock, the secrets key file
 * are created 0600, the folder the service creates for them 0700.
 *
 * Created private from the first byte (open with O_CREAT|O_EXCL and the mode), never
 * created loose and tightened after: there is no moment a file is readable by others.
 * SQLite creates `-wal` and `-shm` with the mode of the database file, so they follow it.
 *
 * Files and folders an older version created looser are tightened at open (chmod), but only
 * those the process owns (a file of another user is the operator's choice, and chmod would
 * fail anyway). An existing folder is tightened only when it holds nothing but the store's
 * own files: a folder that holds other things (the working directory, a home folder) is
 * shared and left as it is; the files in it are still 0600.
 */
import { chmodSync, closeSync, mkdirSync, openSync, readdirSync, statSync } from "node:fs";
import { basename } from "node:path";

const PRIVATE_FILE = 0o600;
const PRIVATE_FOLDER = 0o700;
const GROUP_OR_OTHERS = 0o077;

/** Files the service keeps beside a database, whatever it is called. */
const SHARED_NAMES = ["secrets.key", "default-app-key.json"];
const SIDECARS = ["", "-wal", "-shm", "-journal", ".lock", "-user-index", "-user-index-wal", "-user-index-shm", "-user-index-journal"];
/** A key file being written (src/secrets/secrets-key.ts), linked into place once complete. */
const KEY_FILE_IN_PROGRESS = /^secrets\.key\.[A-Za-z0-9_-]+\.tmp$/;

/**
 * Creates `folder` (and missing parents) 0700. An existing one is tightened to 0700 when this
 * process owns it and it holds only the files of the databases named in `databases`.
 */
export function ensurePrivateFolder(folder: string, databases: readonly string[] = []): void {
  const created = mkdirSync(folder, { recursive: true, mode: PRIVATE_FOLDER });
  if (created !== undefined) return;
  const own = new Set([...SHARED_NAMES, ...databases.flatMap((d) => SIDECARS.map((suffix) => basename(d) + suffix))]);
  const onlyStoreFiles = readdirSync(folder).every((name) => own.has(name) || KEY_FILE_IN_PROGRESS.test(name));
  if (onlyStoreFiles) tighten(folder, PRIVATE_FOLDER);
}

/** Creates an empty file 0600 unless it exists; an existing one is tightened to 0600 (if this process owns it). */
export function createPrivateFile(path: string): void {
  try {
    closeSync(openSync(path, "wx", PRIVATE_FILE));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    tightenFile(path);
  }
}

/** Takes group and others' access away from an existing file this process owns; a missing file is fine. */
export function tightenFile(path: string): void {
  tighten(path, PRIVATE_FILE);
}

function tighten(path: string, mode: number): void {
  let stats;
  try {
    stats = statSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  const ownedByUs = typeof process.getuid === "function" && stats.uid === process.getuid();
  if (ownedByUs && (stats.mode & GROUP_OR_OTHERS) !== 0) chmodSync(path, mode);
}
