/**
 * The store's files are readable by the service's user only (src/secrets/private-files.ts):
 * a new SQLite store, its -wal and -shm and its lock file are 0600 in a 0700 folder, and the
 * looser ones an older version left are tightened at open. Real files, real SQLite.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSqliteStore } from "../../src/store/sqlite";
import { acquireStoreLock } from "../../src/store/process-lock";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "proxy-modes-"));
  dirs.push(dir);
  return dir;
}

const modeOf = (path: string) => (statSync(path).mode & 0o777).toString(8);
const modesIn = (folder: string) => Object.fromEntries(readdirSync(folder).map((name) => [name, modeOf(join(folder, name))]));

/** Opens the store as the service does (lock first), writes a row so the WAL has content, and closes. */
async function openLockedAndWrite(path: string): Promise<void> {
  const lock = acquireStoreLock(path);
  const store = openSqliteStore(path);
  await createAppWithKey(store.apps, "modes", [], Date.now());
  // Both sidecars exist while the store is open: checked then.
  expect(modesIn(join(path, ".."))).toMatchObject({ "proxy.sqlite-wal": "600", "proxy.sqlite-shm": "600" });
  await store.close();
  lock.release();
}

describe("store file modes", () => {
  test("a new store: the database, its -wal and -shm and the lock are 0600, the folder the service creates 0700", async () => {
    const folder = join(tempDir(), "data");
    await openLockedAndWrite(join(folder, "proxy.sqlite"));
    expect(modeOf(folder)).toBe("700");
    expect(modesIn(folder)).toMatchObject({ "proxy.sqlite": "600", "proxy.sqlite.lock": "600" });
    for (const mode of Object.values(modesIn(folder))) expect(mode).toBe("600");
  });

  test("files and the folder an older version created loose (0644, 0755) are tightened at open", async () => {
    const folder = join(tempDir(), "data");
    mkdirSync(folder, { mode: 0o755 });
    chmodSync(folder, 0o755);
    const path = join(folder, "proxy.sqlite");
    // What an older version left: a WAL database and its lock file, created with the default
    // modes; kept open, so its -wal and -shm are still there when the new version opens.
    const old = new Database(path, { create: true });
    old.exec("PRAGMA journal_mode = WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1);");
    writeFileSync(`${path}.lock`, "");
    for (const name of readdirSync(folder)) chmodSync(join(folder, name), 0o644);
    expect(modesIn(folder)).toEqual({ "proxy.sqlite": "644", "proxy.sqlite-wal": "644", "proxy.sqlite-shm": "644", "proxy.sqlite.lock": "644" });

    await openLockedAndWrite(path);
    old.close();
    expect(modeOf(folder)).toBe("700");
    expect(modesIn(folder)).toMatchObject({ "proxy.sqlite": "600", "proxy.sqlite.lock": "600" });
  });

  test("a folder that holds other things is shared: left as it is, while the store's files in it are 0600", async () => {
    const folder = tempDir();
    chmodSync(folder, 0o755);
    writeFileSync(join(folder, "notes.txt"), "the operator's own file");
    chmodSync(join(folder, "notes.txt"), 0o644);
    await openLockedAndWrite(join(folder, "proxy.sqlite"));
    expect(modeOf(folder)).toBe("755");
    expect(modesIn(folder)).toMatchObject({ "notes.txt": "644", "proxy.sqlite": "600", "proxy.sqlite.lock": "600" });
  });
});
