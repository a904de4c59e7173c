import type { Config } from "./config";
import { systemClock, type Clock } from "./clock";
import { createLogger, type Logger } from "./logger";
import { openStore, type Store } from "./store";
import { SessionTokens } from "./auth/session-token";
import { InMemoryBudgetLedger, type BudgetLedger } from "./metering/budget-ledger";
import { PricingCatalogue } from "./metering/pricing";
import { UsageWriter } from "./metering/usage-writer";
import { UpstreamClient, type FetchUpstream } from "./upstream/client";
import { createMockUpstream } from "./upstream/mock";
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
  upstream: UpstreamClient;
  catalogue: PricingCatalogue;
  usageWriter: UsageWriter;
}

export interface DepsOverrides extends Partial<Deps> {
  /** Replaces the network (or, in demo mode, the built-in mock) for upstream calls. */
  fetchUpstream?: FetchUpstream;
}

/** The base URL the in-process mock answers on in demo mode; never goes to the network. */
const DEMO_BASE_URL = "http://demo-upstream.invalid/api/v1";

/** Builds the real dependencies from a Config; `overrides` swaps any of them (tests). */
export function createDeps(config: Config, overrides: DepsOverrides = {}): Deps {
  const clock = overrides.clock ?? systemClock;
  const logger = overrides.logger ?? createLogger(config.logLevel);
  const store = overrides.store ?? openStore(config.databasePath);
  // A generated secret is kept in the store so tokens survive restarts and are shared by
  // every process on the same database.
  const jwtSecret = config.jwtSecret ?? store.settings.getOrCreate("jwt_secret", () => randomString(64));
  const sessionTokens =
    overrides.sessionTokens ?? new SessionTokens(new TextEncoder().encode(jwtSecret), clock, config.sessionTtlSeconds);
  const budget = overrides.budget ?? new InMemoryBudgetLedger((account) => store.usageTotals.spentNano(account));
  const upstream = overrides.upstream ?? createUpstreamClient(config, overrides.fetchUpstream);
  const catalogue =
    overrides.catalogue ??
    new PricingCatalogue(
      upstream,
      {
        promptUsdPerToken: config.fallbackPromptUsdPerToken,
        completionUsdPerToken: config.fallbackCompletionUsdPerToken,
        contextTokens: config.fallbackContextTokens,
      },
      logger,
    );
  const usageWriter = overrides.usageWriter ?? new UsageWriter(store.usageLedger, logger, config.usageFlushMs);
  return { config, clock, logger, store, sessionTokens, budget, upstream, catalogue, usageWriter };
}

function createUpstreamClient(config: Config, fetchOverride: FetchUpstream | undefined): UpstreamClient {
  if (fetchOverride) return new UpstreamClient(fetchOverride, config.upstreamBaseUrl, config.upstreamApiKey ?? "demo", config.upstreamTimeoutMs);
  if (config.demoMode) {
    // No served-request log: a demo server may run for days.
    const mock = createMockUpstream({ recordServed: false });
    const fetchMock: FetchUpstream = (url, init) => mock.fetch(new Request(url, init));
    return new UpstreamClient(fetchMock, DEMO_BASE_URL, "demo", config.upstreamTimeoutMs);
  }
  return new UpstreamClient((url, init) => fetch(url, init), config.upstreamBaseUrl, config.upstreamApiKey!, config.upstreamTimeoutMs);
}
