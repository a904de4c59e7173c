/**
 * SQLITE_SYNCHRONOUS: how long a SQLite commit waits for the disk (src/store/sqlite/database.ts).
 * `normal` (the default) survives a crash of the process; `full` syncs every commit, so a
 * power cut loses no committed reservation or ledger row either.
 */
import { afterEach, expect, test } from "bun:test";
import { loadConfig } from "../../src/config";
import { openStore } from "../../src/store/open";
import { processSecretBox } from "../../src/secrets/secret-box";
import type { SqliteStore } from "../../src/store/sqlite";
import { tempDatabase } from "../helpers/server";

const dirs: Array<{ cleanup(): void }> = [];
afterEach(() => dirs.splice(0).forEach((d) => d.cleanup()));

/** PRAGMA synchronous of a store opened as the service opens it: 1 NORMAL, 2 FULL. */
async function synchronousOf(env: Record<string, string>): Promise<number> {
  const db = tempDatabase();
  dirs.push(db);
  const config = loadConfig({ DATABASE_URL: db.databaseUrl, ...env });
  const store = (await openStore(config.database, { secrets: processSecretBox() })) as SqliteStore;
  try {
    return store.db.query<{ synchronous: number }, []>("PRAGMA synchronous").get()!.synchronous;
  } finally {
    await store.close();
  }
}

test("commits wait for the OS by default, and for the disk with SQLITE_SYNCHRONOUS=full", async () => {
  expect(await synchronousOf({})).toBe(1);
  expect(await synchronousOf({ SQLITE_SYNCHRONOUS: "normal" })).toBe(1);
  expect(await synchronousOf({ SQLITE_SYNCHRONOUS: "full" })).toBe(2);
});

test("another value is refused, naming the setting", () => {
  expect(() => loadConfig({ SQLITE_SYNCHRONOUS: "off" })).toThrow(/SQLITE_SYNCHRONOUS/);
});
