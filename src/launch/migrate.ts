/**
 * `metered-proxy migrate`: opens the store as the service would (the same settings, the same
 * secrets key check), which applies its pending migrations, and exits. For deploy pipelines
 * that migrate before they start or replace instances; the service still migrates at start,
 * so running it is never required.
 */
import type { Config } from "../config";
import { openStore, storeLocation, type Store } from "../store";
import type { SqliteStore } from "../store/sqlite";
import type { PostgresStore } from "../store/postgres";
import { resolveSecretBox } from "../secrets/secrets-key";

export interface Migrated {
  /** The store, without credentials: `sqlite:/data/proxy.sqlite`, `postgres://host:5432/db`. */
  store: string;
  /** The highest migration the store has now. */
  schemaVersion: number;
}

export async function migrateStore(config: Config, warn: (message: string) => void): Promise<Migrated> {
  const secrets = resolveSecretBox(config, warn);
  const store = await openStore(config.database, { poolSize: 1, statementTimeoutMs: config.databaseTimeoutMs, secrets });
  try {
    return { store: storeLocation(config.database), schemaVersion: await schemaVersion(store) };
  } finally {
    await store.close();
  }
}

/** Read back from the store, rather than taken from the list of migrations: it shows what the database holds. */
async function schemaVersion(store: Store): Promise<number> {
  if (store.engine === "sqlite") {
    return (store as SqliteStore).db.query<{ version: number }, []>("SELECT max(version) AS version FROM schema_migrations").get()!.version;
  }
  const rows: Array<{ version: number }> = await (store as PostgresStore).database.sql`SELECT max(version) AS version FROM schema_migrations`;
  return Number(rows[0]!.version);
}
