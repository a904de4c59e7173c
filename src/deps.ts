import type { Config } from "./config";
import { systemClock, type Clock } from "./clock";
import { createLogger, type Logger } from "./logger";
import { openStore, type Store } from "./store";
import { SessionTokens } from "./auth/session-token";
import { InMemoryBudgetLedger, type BudgetLedger } from "./metering/budget-ledger";
import { randomString } from "./random";

/**
 * Everything createApp needs. Each external effect sits behind one of these so tests can
 * build as many apps as they like with a memory store, a manual clock and a fake upstream.
 */
export interface Deps {
  config: Config;
  clock: Clock;
  logger: Logger;
  store: Store;
  sessionTokens: SessionTokens;
  budget: BudgetLedger;
}

/** Builds the real dependencies from a Config; `overrides` swaps any of them (tests). */
export function createDeps(config: Config, overrides: Partial<Deps> = {}): Deps {
  const clock = overrides.clock ?? systemClock;
  const logger = overrides.logger ?? createLogger(config.logLevel);
  const store = overrides.store ?? openStore(config.databasePath);
  // A generated secret is kept in the store so tokens survive restarts and are shared by
  // every process on the same database.
  const jwtSecret = config.jwtSecret ?? store.settings.getOrCreate("jwt_secret", () => randomString(64));
  const sessionTokens =
    overrides.sessionTokens ?? new SessionTokens(new TextEncoder().encode(jwtSecret), clock, config.sessionTtlSeconds);
  const budget = overrides.budget ?? new InMemoryBudgetLedger((account) => store.usageTotals.spentNano(account));
  return { config, clock, logger, store, sessionTokens, budget };
}
