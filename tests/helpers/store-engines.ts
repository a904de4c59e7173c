/**
 * The two store engines a contract suite runs against: an in-memory SQLite store, and a real
 * PostgreSQL server (tests/helpers/postgres.ts) started once per file, with a fresh database
 * per case. Call `storeEngines()` at the top of a test file; `withStore` opens, runs, closes.
 */
import { afterAll, beforeAll } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Store } from "../../src/store";
import type { SecretBox } from "../../src/secrets/secret-box";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite";
import { openPostgresStore } from "../../src/store/postgres";
import { startPostgres, type TestPostgres } from "./postgres";

export type StoreOpener = () => Promise<Store>;

export function storeEngines(): Array<[string, StoreOpener]> {
  let pg: TestPostgres | undefined;
  beforeAll(async () => {
    pg = await startPostgres();
  });
  afterAll(async () => {
    await pg?.destroy();
  });
  return [
    ["sqlite", async () => openSqliteStore(":memory:")],
    ["postgres", async () => openPostgresStore(await pg!.createDatabase(), { poolSize: 4 })],
  ];
}

/** A fresh store from `open` for `work`, closed after it. */
export async function withStore(open: StoreOpener, work: (store: Store) => Promise<void>): Promise<void> {
  const store = await open();
  try {
    await work(store);
  } finally {
    await store.close();
  }
}

/** Opens a store on one database with the given key ring: another process's store, when called twice. */
export type SealedStoreOpener = (box: SecretBox) => Promise<Store>;

/**
 * The two engines for tests of what the store seals: a SQLite file (so its bytes can be
 * read) in a fresh folder, and a fresh PostgreSQL database, per call of the factory.
 */
export function sealedStoreEngines(): Array<[string, () => Promise<SealedStoreOpener>]> {
  let pg: TestPostgres | undefined;
  const folders: string[] = [];
  beforeAll(async () => {
    pg = await startPostgres();
  });
  afterAll(async () => {
    await pg?.destroy();
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });
  return [
    [
      "sqlite",
      async () => {
        const folder = mkdtempSync(join(tmpdir(), "proxy-sealed-"));
        folders.push(folder);
        return async (box) => openSqliteStore(join(folder, "proxy.sqlite"), box);
      },
    ],
    [
      "postgres",
      async () => {
        const url = await pg!.createDatabase();
        return (box) => openPostgresStore(url, { poolSize: 2, secrets: box });
      },
    ],
  ];
}

/** The bytes of a SQLite store's file and its WAL: where a secret must not be found in clear. */
export function sqliteFileBytes(store: Store): Buffer[] {
  const path = (store as SqliteStore).db.filename;
  return [path, `${path}-wal`].filter(existsSync).map((file) => readFileSync(file));
}
