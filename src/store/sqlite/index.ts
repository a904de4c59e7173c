import type { Database } from "bun:sqlite";
import type { Store } from "..";
import { BUSY_TIMEOUT_MS, openDatabase, type SqliteSynchronous } from "./database";
import { SqliteAppRepository } from "./apps";
import { SqliteConnectionRepository } from "./connections";
import { SqliteSettingsRepository } from "./settings";
import { SqliteUsageTotalsRepository } from "./usage-totals";
import { SqliteUsageLedgerRepository } from "./usage-ledger";
import { SqliteGrantRepository } from "./grants";
import { SqliteIdempotencyKeyRepository } from "./idempotency-keys";
import { SqliteWebhookRepository } from "./webhooks";
import { SqliteCallJournalRepository, SqliteInstanceLeaseRepository } from "./call-journal";
import { SqliteFundingFlowRepository } from "./funding-flows";
import { processSecretBox, type SecretBox } from "../../secrets/secret-box";
import { SqliteMaintenance } from "./maintenance";
import { openUserIndexReader, userIndexPath } from "./user-index";

/** The SQLite store also hands out its database handle, for tests and benchmarks that read it directly. */
export interface SqliteStore extends Store {
  readonly engine: "sqlite";
  readonly db: Database;
  /** Checkpoints and the ledger's per-user index, off the event loop; null for `:memory:` (./maintenance.ts). */
  readonly maintenance: SqliteMaintenance | null;
}

/**
 * Opens (creating and migrating) a SQLite file, or `:memory:` for a private database.
 * `secrets` seals what it keeps; without one, this process's random key (tests: the service
 * and the CLI open through openStore, with the configured key). `synchronous`: SQLITE_SYNCHRONOUS.
 */
export function openSqliteStore(path: string, secrets: SecretBox = processSecretBox(), synchronous: SqliteSynchronous = "normal"): SqliteStore {
  const db = openDatabase(path, synchronous);
  // Started by the service only (src/store/engine.ts startMaintenance): a CLI command's
  // connection checkpoints as SQLite does by default.
  const userIndexReader = openUserIndexReader(db, path);
  const maintenance = path === ":memory:" ? null : new SqliteMaintenance(db, { path, indexPath: userIndexPath(path), busyTimeoutMs: BUSY_TIMEOUT_MS });
  return {
    engine: "sqlite",
    db,
    maintenance,
    apps: new SqliteAppRepository(db),
    connections: new SqliteConnectionRepository(db, secrets),
    settings: new SqliteSettingsRepository(db),
    usageTotals: new SqliteUsageTotalsRepository(db),
    usageLedger: new SqliteUsageLedgerRepository(db, userIndexReader),
    grants: new SqliteGrantRepository(db),
    idempotencyKeys: new SqliteIdempotencyKeyRepository(db),
    webhooks: new SqliteWebhookRepository(db, secrets),
    callJournal: new SqliteCallJournalRepository(db),
    instances: new SqliteInstanceLeaseRepository(db),
    fundingFlows: new SqliteFundingFlowRepository(db, secrets),
    secrets,
    ping: async () => {
      db.query("SELECT 1").get();
    },
    close: async () => {
      await maintenance?.stop();
      if (userIndexReader !== db) userIndexReader.close();
      db.close();
    },
  };
}
