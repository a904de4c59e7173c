import type { AppRepository } from "./apps";
import type { ConnectionRepository } from "./connections";
import type { SettingsRepository } from "./settings";
import type { UsageTotalsRepository } from "./usage-totals";
import type { UsageLedgerRepository } from "./usage-ledger";
import type { GrantRepository } from "./grants";
import type { IdempotencyKeyRepository } from "./idempotency-keys";
import type { WebhookRepository } from "./webhooks";
import type { CallJournalRepository, InstanceLeaseRepository } from "./call-journal";
import type { FundingFlowRepository } from "./funding-flows";
import type { SecretBox } from "../secrets/secret-box";

export type StoreEngine = "sqlite" | "postgres";

/**
 * The store: one repository per table family, the same contract on two engines. SQLite is
 * the embedded default (`sqlite::memory:` is what most tests use); PostgreSQL is the shared
 * store of a scale-out deployment (`DATABASE_URL=postgres://…`). Every method is
 * asynchronous because Postgres is; SQLite answers at once.
 */
export interface Store {
  readonly engine: StoreEngine;
  readonly apps: AppRepository;
  readonly connections: ConnectionRepository;
  readonly settings: SettingsRepository;
  readonly usageTotals: UsageTotalsRepository;
  readonly usageLedger: UsageLedgerRepository;
  readonly grants: GrantRepository;
  readonly idempotencyKeys: IdempotencyKeyRepository;
  readonly webhooks: WebhookRepository;
  /** Calls that may have reached the upstream and are not settled yet (src/store/call-journal.ts). */
  readonly callJournal: CallJournalRepository;
  readonly instances: InstanceLeaseRepository;
  /** Pending PKCE flows of users linking their own upstream account (src/store/funding-flows.ts). */
  readonly fundingFlows: FundingFlowRepository;
  /** Seals the secrets this store keeps (webhook signing secrets, a generated JWT secret, users' upstream keys, PKCE verifiers): src/secrets/. */
  readonly secrets: SecretBox;
  /** One round trip to the database; throws when it is unreachable. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export { openStore, openStoreEngine, storeLocation } from "./open";
