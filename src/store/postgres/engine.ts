import type { OpenStoreOptions } from "../open";
import type { Counters, CountersContext, OpenedStoreEngine } from "../engine";
import { openPostgresStore, type PostgresStore } from ".";
import type { PostgresDatabase } from "./database";
import { PostgresBudgetLedger } from "./budget-ledger";
import { PostgresRateLimiter } from "./rate-limiter";
import { postgresChangeFeed } from "./change-feed";
import { warnIfCommitsNotDurable } from "./commit-durability";

/**
 * The PostgreSQL engine's parts, all on the store's pool: the store, its change feed, and,
 * for instances that share only the database, the budget ledger and rate limiter kept in it.
 */
export function postgresEngine(store: PostgresStore): OpenedStoreEngine {
  const { database } = store;
  return {
    store,
    // One batch's commit waits for the disk while the next one's rows are inserted
    // (ARCHITECTURE.md §7 "Two writer batches on PostgreSQL").
    writerConcurrency: 2,
    counters: (context) => postgresCounters(database, context),
    openChangeFeed: (logger) => postgresChangeFeed(database.sql, logger),
    // PostgreSQL keeps its own house (checkpoints, vacuum): only its durability is looked at, once.
    startMaintenance: (logger) => void warnIfCommitsNotDurable(database, logger),
    schemaVersion: async () => {
      const rows: Array<{ version: number }> = await database.sql`SELECT max(version) AS version FROM schema_migrations`;
      return Number(rows[0]!.version);
    },
  };
}

/** Connects, migrates (src/store/postgres/index.ts) and builds the engine's parts. */
export async function openPostgresEngine(url: string, options: OpenStoreOptions): Promise<OpenedStoreEngine> {
  return postgresEngine(await openPostgresStore(url, options));
}

/**
 * Budgets and limits in the database. The ledger is built with the limiter, so that a chat
 * call's check goes in its reservation's statement (./budget-ledger.ts), and it keeps this
 * process's lease in proxy_instances, which is the lease its journal entries are judged by.
 */
function postgresCounters(database: PostgresDatabase, context: CountersContext): Counters {
  const limiter = new PostgresRateLimiter(database, context.now);
  const ledger = new PostgresBudgetLedger(database, context.logger, limiter, context.instanceId, context.leaseRenewed);
  return {
    kind: "postgres",
    ledger,
    limiter,
    limiterIsShared: true,
    foldsLimiterChecks: true,
    keepsInstanceLease: true,
    server: null,
    start: async () => {
      await ledger.start();
      return true;
    },
    close: () => ledger.close(),
  };
}
