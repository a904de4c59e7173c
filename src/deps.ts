import type { Config } from "./config";
import { systemClock, type Clock } from "./clock";
import { createLogger, type Logger } from "./logger";
import { openStore, type Store } from "./store";
import { resolveSecretBox } from "./secrets/secrets-key";
import { storedJwtSecret } from "./store/stored-secrets";
import { SessionTokens } from "./auth/session-token";
import { InMemoryBudgetLedger, type BudgetLedger } from "./metering/budget-ledger";
import { PricingCatalogue } from "./metering/pricing";
import { UsageWriter } from "./metering/usage-writer";
import { UpstreamClient, type FetchUpstream } from "./upstream/client";
import { createMockUpstream } from "./upstream/mock";
import { turnBatchedFetch } from "./upstream/turn-batched-fetch";
import { randomString } from "./random";
import type Redis from "ioredis";
import { InMemoryRateLimiter, type RateLimiter } from "./ratelimit/rate-limiter";
import { RedisRateLimiter } from "./ratelimit/redis-rate-limiter";
import { FallbackRateLimiter } from "./ratelimit/fallback-rate-limiter";
import { RedisBudgetLedger } from "./metering/redis-budget-ledger";
import { PostgresBudgetLedger } from "./metering/postgres-budget-ledger";
import { PostgresRateLimiter } from "./ratelimit/postgres-rate-limiter";
import type { PostgresStore } from "./store/postgres";
import type { SqliteStore } from "./store/sqlite";
import { postgresChangeFeed, sqliteChangeFeed } from "./store/change-feed";
import { withReadCache } from "./store/cached-store";
import { BudgetWatcher } from "./webhooks/budget-watcher";
import { WebhookDispatcher } from "./webhooks/dispatcher";
import { InstanceLease } from "./metering/instance-lease";

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
  rateLimiter: RateLimiter;
  /** Set when REDIS_URL is: rate limits and budgets are shared through it. */
  redis: Redis | null;
  /** Turns spend into budget.threshold and grant.exhausted webhook events (started by src/index.ts). */
  budgetWatcher: BudgetWatcher;
  /** Sends the webhook outbox (started by src/index.ts; tests run its rounds by hand). */
  webhooks: WebhookDispatcher;
  /** This process's id: the owner of its journaled calls and of its budget holds. */
  instanceId: string;
  /**
   * Keeps this process's lease in the store, by which its journaled calls are its own
   * (started by connectDependencies). Null where the budget ledger keeps that same lease
   * (PostgreSQL without Redis).
   */
  instanceLease: InstanceLease | null;
}

export interface DepsOverrides extends Partial<Deps> {
  /** Replaces the network (or, in demo mode, the built-in mock) for upstream calls. */
  fetchUpstream?: FetchUpstream;
  /** The session signing secret, in place of JWT_SECRET (openDeps passes JWT_SECRET, or else the stored one). */
  jwtSecret?: string;
}

/**
 * Opens the configured store (running its migrations), then builds the dependencies on
 * it. The only asynchronous step of start-up that needs the database.
 */
export async function openDeps(config: Config, overrides: DepsOverrides = {}): Promise<Deps> {
  const logger = overrides.logger ?? createLogger(config.logLevel);
  const store = overrides.store ?? (await openCachedStore(config, logger));
  // A generated secret is kept in the store (sealed) so tokens survive restarts and are
  // shared by every process on the same database.
  const jwtSecret = overrides.jwtSecret ?? config.jwtSecret ?? (await storedJwtSecret(store, () => randomString(64)));
  return createDeps(config, { ...overrides, logger, store, jwtSecret });
}

/** The configured store with its hot reads cached, invalidated by the engine's change feed. */
async function openCachedStore(config: Config, logger: Logger): Promise<Store> {
  const secrets = resolveSecretBox(config, (message) => logger.warn(message));
  const store = await openStore(config.database, { poolSize: config.databasePoolSize, statementTimeoutMs: config.databaseTimeoutMs, secrets });
  try {
    const feed =
      store.engine === "postgres" ? await postgresChangeFeed((store as PostgresStore).database.sql, logger) : sqliteChangeFeed((store as SqliteStore).db);
    return withReadCache(store, feed);
  } catch (err) {
    await store.close();
    throw err;
  }
}

/** The base URL the in-process mock answers on in demo mode; never goes to the network. */
const DEMO_BASE_URL = "http://demo-upstream.invalid/api/v1";

/**
 * Builds the dependencies on an open store; `overrides` swaps any of them (tests). The
 * session secret is JWT_SECRET or `overrides.jwtSecret`: see openDeps for the stored one.
 */
export function createDeps(config: Config, overrides: DepsOverrides & { store: Store }): Deps {
  const clock = overrides.clock ?? systemClock;
  const logger = overrides.logger ?? createLogger(config.logLevel);
  const store = overrides.store;
  const jwtSecret = overrides.jwtSecret ?? config.jwtSecret;
  if (!jwtSecret) throw new Error("createDeps needs JWT_SECRET or a jwtSecret override (openDeps reads the stored one)");
  const sessionTokens = overrides.sessionTokens ?? new SessionTokens(new TextEncoder().encode(jwtSecret), clock, config.sessionTtlSeconds);
  const redis = overrides.redis !== undefined ? overrides.redis : config.redisUrl ? createRedis(config, logger) : null;
  const instanceId = overrides.instanceId ?? crypto.randomUUID();
  const loadSpent = (account: string) => store.usageTotals.spentNano(account);
  const loadFrozenCap = (account: string) => store.usageTotals.frozenCapNano(account);
  // Shared state goes where the instances share it: Redis when set (the fast path, with the
  // store as the durable ledger), else PostgreSQL itself; SQLite alone is one process.
  const postgres = store.engine === "postgres" ? (store as PostgresStore).database : null;
  const postgresLimiter = !redis && postgres ? new PostgresRateLimiter(postgres, () => clock.now()) : null;
  const budget =
    overrides.budget ??
    (redis
      ? new RedisBudgetLedger(redis, loadSpent, logger, loadFrozenCap, instanceId)
      : postgres
        ? new PostgresBudgetLedger(postgres, logger, postgresLimiter ?? undefined, instanceId)
        : new InMemoryBudgetLedger(loadSpent, loadFrozenCap));
  const instanceLease = budget instanceof PostgresBudgetLedger ? null : new InstanceLease(store.instances, instanceId, logger);
  const memoryLimiter = new InMemoryRateLimiter(() => clock.now());
  const sharedLimiter = redis ? new RedisRateLimiter(redis) : postgresLimiter;
  const rateLimiter = overrides.rateLimiter ?? (sharedLimiter ? new FallbackRateLimiter(sharedLimiter, memoryLimiter, logger) : memoryLimiter);
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
  const usageWriter = overrides.usageWriter ?? new UsageWriter(store.usageLedger, logger, config.usageFlushMs, 1000, store.engine === "postgres" ? 2 : 1);
  const budgetWatcher = overrides.budgetWatcher ?? new BudgetWatcher(store, budget, clock, logger);
  const webhooks = overrides.webhooks ?? new WebhookDispatcher(store.webhooks, clock, logger, config.webhooks);
  return {
    config,
    clock,
    logger,
    store,
    sessionTokens,
    budget,
    upstream,
    catalogue,
    usageWriter,
    rateLimiter,
    redis,
    budgetWatcher,
    webhooks,
    instanceId,
    instanceLease,
  };
}

/**
 * Waits (bounded) for connections that must be up before serving: with the offline queue
 * off, commands sent before Redis is ready fail. If Redis does not come up in time the
 * service starts anyway: rate limits fall back, budgets answer 503 until it is back.
 */
export async function connectDependencies(deps: Deps, timeoutMs = 5000): Promise<boolean> {
  // The leases are registered before the first call can be reserved or journaled.
  if (deps.budget instanceof PostgresBudgetLedger) await deps.budget.start();
  await deps.instanceLease?.start();
  const redis = deps.redis;
  if (!redis || redis.status === "ready") return true;
  const ready = await Promise.race([new Promise<boolean>((resolve) => redis.once("ready", () => resolve(true))), Bun.sleep(timeoutMs).then(() => false)]);
  if (!ready) deps.logger.warn("Redis is not reachable yet; budgets answer 503 until it is", { timeoutMs });
  return ready;
}

/**
 * A Redis client that fails fast: no offline queue (a command while disconnected fails at
 * once instead of waiting), no per-command retries, and a deadline on every command.
 * It reconnects in the background by itself, so Redis coming back needs no restart.
 */
function createRedis(config: Config, logger: Logger): Redis {
  // Loaded only when REDIS_URL is set: importing ioredis costs about 17 MB of resident
  // memory (measured, BENCHMARKS.md), which the embedded mode has no use for.
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a synchronous, lazy load (see above)
  const { default: RedisClient } = require("ioredis") as { default: typeof Redis };
  const redis = new RedisClient(config.redisUrl!, {
    commandTimeout: config.redisCommandTimeoutMs,
    connectTimeout: Math.max(1000, config.redisCommandTimeoutMs * 4),
    enableOfflineQueue: false,
    // Commands issued in the same event-loop turn (many requests' reserves, limits and
    // settles) go out in one write: 11 % less CPU per JSON call (BENCHMARKS.md, issue 14).
    enableAutoPipelining: true,
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(100 * attempt, 1000),
  });
  // Connection errors are reported by the limiter and the ledger when they matter; this
  // listener only keeps ioredis from printing every reconnect attempt.
  redis.on("error", (err) => logger.debug("redis connection error", { error: err.message }));
  return redis;
}

function createUpstreamClient(config: Config, fetchOverride: FetchUpstream | undefined): UpstreamClient {
  if (fetchOverride) return new UpstreamClient(fetchOverride, config.upstreamBaseUrl, config.upstreamApiKey ?? "demo", config.upstreamTimeoutMs);
  if (config.demoMode) {
    // No served-request log: a demo server may run for days. Paced, so its answers visibly stream.
    const mock = createMockUpstream({ recordServed: false, streamTokensPerSecond: config.demoStreamTokensPerSecond });
    const fetchMock: FetchUpstream = (url, init) => mock.fetch(new Request(url, init));
    return new UpstreamClient(fetchMock, DEMO_BASE_URL, "demo", config.upstreamTimeoutMs);
  }
  return new UpstreamClient(
    turnBatchedFetch((url, init) => fetch(url, init)),
    config.upstreamBaseUrl,
    config.upstreamApiKey!,
    config.upstreamTimeoutMs,
  );
}
