import type { Config } from "./config";
import { systemClock, type Clock } from "./clock";
import { createLogger, type Logger } from "./logger";
import { openStoreEngine, type Store } from "./store";
import { storeAlone, type BudgetBackend, type Counters, type StoreEngine } from "./store/engine";
import { redisCounters } from "./store/redis/engine";
import { resolveSecretBox } from "./secrets/secrets-key";
import { storedJwtSecret } from "./store/stored-secrets";
import { SessionTokens } from "./auth/session-token";
import type { BudgetLedger } from "./budget/ledger";
import { PricingCatalogue } from "./pricing/catalogue";
import { UsageWriter } from "./metering/usage-writer";
import { UpstreamClient, type FetchUpstream } from "./upstream/client";
import { openDemoUpstream } from "./upstream/demo-upstream";
import { turnBatchedFetch } from "./upstream/turn-batched-fetch";
import { idleBoundedFetch } from "./upstream/idle-bounded-fetch";
import { randomString } from "./random";
import { InMemoryRateLimiter, type RateLimiter } from "./ratelimit/rate-limiter";
import { FallbackRateLimiter } from "./ratelimit/fallback-rate-limiter";
import { withReadCache } from "./store/cached-store";
import { BudgetWatcher } from "./webhooks/budget-watcher";
import { WebhookDispatcher } from "./webhooks/dispatcher";
import { InstanceLease } from "./metering/instance-lease";
import { LeaseContinuity } from "./metering/lease-continuity";

/** Set the first time shared counters (Redis) serve the store: from then on, a loss of theirs may leave calls in flight. */
const COUNTERS_EPOCH_SETTING = "shared_counters_since";

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
  /** Where the budget counters live and how the limiter sits beside them, as the engines reported it. */
  budgetBackend: BudgetBackend;
  upstream: UpstreamClient;
  catalogue: PricingCatalogue;
  usageWriter: UsageWriter;
  rateLimiter: RateLimiter;
  /** Turns spend into budget.threshold and grant.exhausted webhook events (started by src/index.ts). */
  budgetWatcher: BudgetWatcher;
  /** Sends the webhook outbox (started by src/index.ts; tests run its rounds by hand). */
  webhooks: WebhookDispatcher;
  /** This process's id: the owner of its journaled calls and of its budget holds. */
  instanceId: string;
  /** How long this process's lease in the store has held without a break: when others' journal entries are a dead one's. */
  leaseContinuity: LeaseContinuity;
}

export interface DepsOverrides extends Partial<Omit<Deps, "store" | "budget" | "budgetBackend">> {
  /**
   * The store engine, opened, in place of the configured one: tests with an in-memory SQLite
   * store, or several instances on one PostgreSQL database (src/store/engine.ts).
   */
  engine?: StoreEngine;
  /** A store on its own, in place of the configured one: budgets and limits in this process (storeAlone). */
  store?: Store;
  /** Replaces the network (or, in demo mode, the mock) for upstream calls. */
  fetchUpstream?: FetchUpstream;
  /** The session signing secret, in place of JWT_SECRET (openDeps passes JWT_SECRET, or else the stored one). */
  jwtSecret?: string;
}

/**
 * Opens the configured store (running its migrations), then builds the dependencies on
 * it. The only asynchronous step of start-up that needs the database. In demo mode it first
 * loads the mock upstream (an asynchronous import, which createDeps cannot make), so a
 * binary without it stops before any store is created.
 */
export async function openDeps(config: Config, overrides: DepsOverrides = {}): Promise<Deps> {
  const upstream = overrides.upstream ?? (config.demoMode && !overrides.fetchUpstream ? await openDemoUpstream(config) : undefined);
  const logger = overrides.logger ?? createLogger(config.logLevel);
  const engine = overrides.engine ?? (overrides.store ? storeAlone(overrides.store) : await openCachedEngine(config, logger));
  // A generated secret is kept in the store (sealed) so tokens survive restarts and are
  // shared by every process on the same database.
  const jwtSecret = overrides.jwtSecret ?? config.jwtSecret ?? (await storedJwtSecret(engine.store, () => randomString(64)));
  return createDeps(config, { ...overrides, upstream, logger, engine, jwtSecret });
}

/** The configured engine, its store's hot reads cached and invalidated by the engine's change feed. */
async function openCachedEngine(config: Config, logger: Logger): Promise<StoreEngine> {
  const secrets = resolveSecretBox(config, (message) => logger.warn(message));
  const engine = await openStoreEngine(config.database, { poolSize: config.databasePoolSize, statementTimeoutMs: config.databaseTimeoutMs, secrets });
  try {
    const cached = { ...engine, store: withReadCache(engine.store, await engine.openChangeFeed(logger)) };
    engine.startMaintenance(logger);
    return cached;
  } catch (err) {
    await engine.store.close();
    throw err;
  }
}

/**
 * Builds the dependencies on an open store engine (or a store alone); `overrides` swaps any
 * of them (tests). The session secret is JWT_SECRET or `overrides.jwtSecret`: see openDeps
 * for the stored one. Demo mode's upstream too is openDeps' to load, or the caller's to pass
 * (`upstream`, or `fetchUpstream`): see src/upstream/demo-upstream.ts.
 */
export function createDeps(config: Config, overrides: DepsOverrides): Deps {
  const clock = overrides.clock ?? systemClock;
  const logger = overrides.logger ?? createLogger(config.logLevel);
  const engine = overrides.engine ?? (overrides.store && storeAlone(overrides.store));
  if (!engine) throw new Error("createDeps needs a store engine or a store (openDeps opens the configured one)");
  const store = engine.store;
  const jwtSecret = overrides.jwtSecret ?? config.jwtSecret;
  if (!jwtSecret) throw new Error("createDeps needs JWT_SECRET or a jwtSecret override (openDeps reads the stored one)");
  const sessionTokens = overrides.sessionTokens ?? new SessionTokens(new TextEncoder().encode(jwtSecret), clock, config.sessionTtlSeconds);
  const instanceId = overrides.instanceId ?? crypto.randomUUID();
  const leaseContinuity = overrides.leaseContinuity ?? new LeaseContinuity();
  // Shared state goes where the instances share it: Redis when set (the fast path, with the
  // store as the durable ledger), else the store's engine (PostgreSQL; SQLite keeps it here).
  const context = {
    logger,
    now: () => clock.now(),
    instanceId,
    loadSpent: (account: string) => store.usageTotals.spentNano(account),
    loadFrozenCap: (account: string) => store.usageTotals.frozenCapNano(account),
    loadTruth: (account: string) => store.usageTotals.truth(account),
    claimFirstCountersEpoch: () => store.settings.claim(COUNTERS_EPOCH_SETTING, new Date(clock.now()).toISOString()),
    leaseRenewed: (ok: boolean) => leaseContinuity.renewed(ok),
    budgetIdleMs: config.budgetIdleMs,
  };
  const counters = config.redisUrl
    ? redisCounters({ url: config.redisUrl, commandTimeoutMs: config.redisCommandTimeoutMs }, context)
    : engine.counters(context);
  const { budgetBackend, rateLimiter } = wireCounters(
    counters,
    new InstanceLease(store.instances, instanceId, logger, leaseContinuity),
    overrides.rateLimiter,
    context,
  );
  const budget = counters.ledger;
  const upstream = overrides.upstream ?? createUpstreamClient(config, overrides.fetchUpstream);
  const catalogue =
    overrides.catalogue ??
    new PricingCatalogue(
      () => upstream.listModels(),
      {
        promptUsdPerToken: config.fallbackPromptUsdPerToken,
        completionUsdPerToken: config.fallbackCompletionUsdPerToken,
        contextTokens: config.fallbackContextTokens,
      },
      logger,
    );
  const usageWriter =
    overrides.usageWriter ?? new UsageWriter(store.usageLedger, logger, config.usageFlushMs, 1000, engine.writerConcurrency, store.callJournal);
  const budgetWatcher = overrides.budgetWatcher ?? new BudgetWatcher(store, budget, clock, logger);
  const webhooks = overrides.webhooks ?? new WebhookDispatcher(store.webhooks, clock, logger, config.webhooks);
  return {
    config,
    clock,
    logger,
    store,
    sessionTokens,
    budget,
    budgetBackend,
    upstream,
    catalogue,
    usageWriter,
    rateLimiter,
    budgetWatcher,
    webhooks,
    instanceId,
    leaseContinuity,
  };
}

/**
 * The limiter and the lifecycle that go with the counters, as the counters say: a shared
 * limiter gets this process's own behind it; the instance lease is kept here unless the
 * ledger keeps it; a chat call's limit goes in its reservation where the ledger can take it.
 * A limiter passed in (tests, benchmarks) is used as it is, and never folded.
 */
function wireCounters(
  counters: Counters,
  lease: InstanceLease,
  replacedLimiter: RateLimiter | undefined,
  context: { logger: Logger; now: () => number },
): { budgetBackend: BudgetBackend; rateLimiter: RateLimiter } {
  const fallback =
    counters.limiterIsShared && !replacedLimiter ? new FallbackRateLimiter(counters.limiter, new InMemoryRateLimiter(context.now), context.logger) : null;
  const instanceLease = counters.keepsInstanceLease ? null : lease;
  const budgetBackend: BudgetBackend = {
    kind: counters.kind,
    server: counters.server,
    limiterFallback: fallback,
    chatLimitFoldable: fallback && counters.foldsLimiterChecks ? () => !fallback.degraded : null,
    // The leases are registered before the first call can be reserved or journaled.
    start: async (timeoutMs) => {
      await instanceLease?.start();
      return counters.start(timeoutMs);
    },
    close: async () => {
      await counters.close();
      // Its lease dropped, whatever it left in the journal is the others' (or the next start's) at once.
      await instanceLease?.stop();
    },
  };
  return { budgetBackend, rateLimiter: replacedLimiter ?? fallback ?? counters.limiter };
}

/**
 * Waits (bounded) for what must be up before serving: the leases registered, and the
 * counters' server (Redis) connected. If it does not come up in time the service starts
 * anyway: rate limits fall back, budgets answer 503 until it is back.
 */
export async function connectDependencies(deps: Deps, timeoutMs = 5000): Promise<boolean> {
  return deps.budgetBackend.start(timeoutMs);
}

function createUpstreamClient(config: Config, fetchOverride: FetchUpstream | undefined): UpstreamClient {
  if (fetchOverride) return new UpstreamClient(fetchOverride, config.upstreamBaseUrl, config.upstreamApiKey ?? "demo", config.upstreamTimeoutMs);
  if (config.demoMode)
    throw new Error("createDeps in demo mode needs the mock upstream: openDeps loads it, or pass `upstream` (demoUpstreamClient) or `fetchUpstream`");
  return new UpstreamClient(
    turnBatchedFetch(idleBoundedFetch(config.upstreamIdleReuseMs)),
    config.upstreamBaseUrl,
    config.upstreamApiKey!,
    config.upstreamTimeoutMs,
  );
}
