import { inProcessCounters, type OpenedStoreEngine } from "../engine";
import { sqliteChangeFeed } from "./change-feed";
import type { SqliteStore } from ".";

/**
 * The SQLite engine's parts: the store and its change feed. One process serves a file
 * (src/launch/embedded-lock.ts), so budgets and limits stay in its memory; with REDIS_URL
 * several processes share a file and Redis keeps them instead (src/store/redis/engine.ts).
 */
export function sqliteEngine(store: SqliteStore): OpenedStoreEngine {
  return {
    store,
    writerConcurrency: 1,
    counters: inProcessCounters,
    openChangeFeed: async () => sqliteChangeFeed(store.db),
    startMaintenance: (logger) => store.maintenance?.start(logger),
    schemaVersion: async () => store.db.query<{ version: number }, []>("SELECT max(version) AS version FROM schema_migrations").get()!.version,
  };
}
