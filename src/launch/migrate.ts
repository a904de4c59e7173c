/**
 * `metered-proxy migrate`: opens the store as the service would (the same settings, the same
 * secrets key check), which applies its pending migrations, and exits. For deploy pipelines
 * that migrate before they start or replace instances; the service still migrates at start,
 * so running it is never required.
 */
import type { Config } from "../config";
import { openStoreEngine, storeLocation } from "../store";
import { resolveSecretBox } from "../secrets/secrets-key";

export interface Migrated {
  /** The store, without credentials: `sqlite:/data/proxy.sqlite`, `postgres://host:5432/db`. */
  store: string;
  /** The highest migration the store has now. */
  schemaVersion: number;
}

export async function migrateStore(config: Config, warn: (message: string) => void): Promise<Migrated> {
  const secrets = resolveSecretBox(config, warn);
  const engine = await openStoreEngine(config.database, { poolSize: 1, statementTimeoutMs: config.databaseTimeoutMs, secrets });
  try {
    // Read back from the store, rather than taken from the list of migrations: it shows what the database holds.
    return { store: storeLocation(config.database), schemaVersion: await engine.schemaVersion() };
  } finally {
    await engine.store.close();
  }
}
