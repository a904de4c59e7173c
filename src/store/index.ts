import type { Database } from "bun:sqlite";
import { openDatabase } from "./database";
import { AppRepository } from "./apps";
import { ConnectionRepository } from "./connections";
import { SettingsRepository } from "./settings";
import { UsageTotalsRepository } from "./usage-totals";
import { UsageLedgerRepository } from "./usage-ledger";
import { GrantRepository } from "./grants";
import { IdempotencyKeyRepository } from "./idempotency-keys";

/**
 * The store: one SQLite database, one repository per table family. `sqlite::memory:`
 * gives the in-memory implementation with the same code, which is what tests use
 * unless the feature is about files.
 */
export interface Store {
  readonly db: Database;
  readonly apps: AppRepository;
  readonly connections: ConnectionRepository;
  readonly settings: SettingsRepository;
  readonly usageTotals: UsageTotalsRepository;
  readonly usageLedger: UsageLedgerRepository;
  readonly grants: GrantRepository;
  readonly idempotencyKeys: IdempotencyKeyRepository;
  close(): void;
}

export function openStore(path: string): Store {
  const db = openDatabase(path);
  return {
    db,
    apps: new AppRepository(db),
    connections: new ConnectionRepository(db),
    settings: new SettingsRepository(db),
    usageTotals: new UsageTotalsRepository(db),
    usageLedger: new UsageLedgerRepository(db),
    grants: new GrantRepository(db),
    idempotencyKeys: new IdempotencyKeyRepository(db),
    close: () => db.close(),
  };
}
