import type { Config } from "../config";
import { acquireStoreLock, type StoreLock } from "../store/process-lock";

/**
 * Embedded mode (no REDIS_URL, a database file) keeps budgets in this process's memory, so
 * it must be the only process serving the file: a second one would double every cap.
 * Taken before the store is opened, so a refused process runs no migration and creates no
 * default app. With REDIS_URL the counters are shared and any number of processes may run;
 * `sqlite::memory:` is private to its process. Throws StoreLockedError when another process
 * holds it (src/launch/startup-failure.ts tells the operator what to do).
 */
export function lockEmbeddedStore(config: Config): StoreLock | null {
  const { database } = config;
  if (config.redisUrl || database.engine !== "sqlite" || database.path === ":memory:") return null;
  return acquireStoreLock(database.path);
}
