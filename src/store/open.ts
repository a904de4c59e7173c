import type { DatabaseTarget } from "../config";
import type { Store } from ".";
import { openSqliteStore } from "./sqlite";
import { sqliteEngine } from "./sqlite/engine";
import type { OpenedStoreEngine } from "./engine";
import type { SecretBox } from "../secrets/secret-box";
import { secureStoredSecrets } from "./stored-secrets";

export interface OpenStoreOptions {
  /** PostgreSQL: connections in this process's pool. */
  poolSize?: number;
  /** PostgreSQL: longest wait for a pooled connection, and for a statement, before giving up. */
  statementTimeoutMs?: number;
  /** Seals the secrets the store keeps (src/secrets/secrets-key.ts resolves it from the Config). */
  secrets?: SecretBox;
}

/**
 * Opens the configured engine, applies its pending migrations, checks that `secrets` opens
 * what the store has sealed and seals what an older version left in clear. What the service
 * and the operator CLI open.
 */
export async function openStore(target: DatabaseTarget, options: OpenStoreOptions & { secrets: SecretBox; checkSecrets?: false }): Promise<Store> {
  return (await openStoreEngine(target, options)).store;
}

/** The same, with the rest of the engine's parts (src/store/engine.ts): what the service builds on. */
export async function openStoreEngine(
  target: DatabaseTarget,
  options: OpenStoreOptions & { secrets: SecretBox; checkSecrets?: false },
): Promise<OpenedStoreEngine> {
  const engine = await openEngine(target, options);
  // Skipped only by `cli secrets reset`, which repairs a store this check refuses.
  if (options.checkSecrets === false) return engine;
  try {
    await secureStoredSecrets(engine.store);
  } catch (err) {
    await engine.store.close();
    throw err;
  }
  return engine;
}

async function openEngine(target: DatabaseTarget, options: OpenStoreOptions & { secrets: SecretBox }): Promise<OpenedStoreEngine> {
  if (target.engine === "sqlite") return sqliteEngine(openSqliteStore(target.path, options.secrets, target.synchronous));
  // Loaded only for PostgreSQL, so the embedded mode does not pay for the driver.
  const { openPostgresEngine } = await import("./postgres/engine");
  return openPostgresEngine(target.url, options);
}

/** Where the store is, for logs and /healthz: the SQLite path, or the Postgres host and database without credentials. */
export function storeLocation(target: DatabaseTarget): string {
  if (target.engine === "sqlite") return `sqlite:${target.path}`;
  try {
    const url = new URL(target.url);
    return `postgres://${url.host}${url.pathname}`;
  } catch {
    return "postgres://(unparsable url)";
  }
}
