import type { Store } from "..";
import type { OpenStoreOptions } from "../open";
import { PostgresDatabase } from "./database";
import { migratePostgres } from "./migrations";
import { PostgresAppRepository } from "./apps";
import { PostgresConnectionRepository } from "./connections";
import { PostgresSettingsRepository } from "./settings";
import { PostgresUsageTotalsRepository } from "./usage-totals";
import { PostgresUsageLedgerRepository } from "./usage-ledger";
import { PostgresGrantRepository } from "./grants";
import { PostgresIdempotencyKeyRepository } from "./idempotency-keys";
import { PostgresWebhookRepository } from "./webhooks";
import { PostgresCallJournalRepository, PostgresInstanceLeaseRepository } from "./call-journal";
import { PostgresFundingFlowRepository } from "./funding-flows";
import { processSecretBox } from "../../secrets/secret-box";

/** The Postgres store also hands out its pool, for the budget ledger, rate limiter and change feed built on it. */
export interface PostgresStore extends Store {
  readonly engine: "postgres";
  readonly database: PostgresDatabase;
}

/** Connects, applies pending migrations (under the migration lock), and returns the store. */
export async function openPostgresStore(url: string, options: OpenStoreOptions = {}): Promise<PostgresStore> {
  // Without a box, this process's random key (tests: the service and the CLI pass the configured one).
  const secrets = options.secrets ?? processSecretBox();
  const database = new PostgresDatabase(url, options);
  try {
    await migratePostgres(database.sql);
  } catch (err) {
    await database.close().catch(() => {});
    throw err;
  }
  return {
    engine: "postgres",
    database,
    apps: new PostgresAppRepository(database),
    connections: new PostgresConnectionRepository(database, secrets),
    settings: new PostgresSettingsRepository(database),
    usageTotals: new PostgresUsageTotalsRepository(database),
    usageLedger: new PostgresUsageLedgerRepository(database),
    grants: new PostgresGrantRepository(database),
    idempotencyKeys: new PostgresIdempotencyKeyRepository(database),
    webhooks: new PostgresWebhookRepository(database, secrets),
    callJournal: new PostgresCallJournalRepository(database),
    instances: new PostgresInstanceLeaseRepository(database),
    fundingFlows: new PostgresFundingFlowRepository(database, secrets),
    secrets,
    ping: async () => {
      await database.run((sql) => sql`SELECT 1`);
    },
    close: () => database.close(),
  };
}
