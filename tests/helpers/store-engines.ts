/**
 * The two store engines a contract suite runs against: an in-memory SQLite store, and a real
 * PostgreSQL server (tests/helpers/postgres.ts) started once per file, with a fresh database
 * per case. Call `storeEngines()` at the top of a test file; `withStore` opens, runs, closes.
 */
import { afterAll, beforeAll } from "bun:test";
import type { Store } from "../../src/store";
import { openSqliteStore } from "../../src/store/sqlite";
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
