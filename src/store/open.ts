import type { DatabaseTarget } from "../config";
import type { Store } from ".";
import { openSqliteStore } from "./sqlite";

export interface OpenStoreOptions {
  /** PostgreSQL: connections in this process's pool. */
  poolSize?: number;
  /** PostgreSQL: longest wait for a pooled connection, and for a statement, before giving up. */
  statementTimeoutMs?: number;
}

/** Opens the configured engine and applies its pending migrations. */
export async function openStore(target: DatabaseTarget, options: OpenStoreOptions = {}): Promise<Store> {
  if (target.engine === "sqlite") return openSqliteStore(target.path);
  // Loaded only for PostgreSQL, so the embedded mode does not pay for the driver.
  const { openPostgresStore } = await import("./postgres");
  return openPostgresStore(target.url, options);
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
