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
import type Redis from "ioredis";
import { InMemoryRateLimiter, type RateLimiter } from "./ratelimit/rate-limiter";
import { RedisRateLimiter } from "./ratelimit/redis-rate-limiter";
import { FallbackRateLimiter } from "./ratelimit/fallback-rate-limiter";
import { RedisBudgetLedger } from "./metering/redis-budget-ledger";

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
  const redis = overrides.redis !== undefined ? overrides.redis : config.redisUrl ? createRedis(config, logger) : null;
  const loadSpent = (account: string) => store.usageTotals.spentNano(account);
  const loadFrozenCap = (account: string) => store.usageTotals.frozenCapNano(account);
  const budget =
    overrides.budget ??
    (redis ? new RedisBudgetLedger(redis, loadSpent, logger, loadFrozenCap) : new InMemoryBudgetLedger(loadSpent, loadFrozenCap));
  const memoryLimiter = new InMemoryRateLimiter(() => clock.now());
  const rateLimiter =
    overrides.rateLimiter ?? (redis ? new FallbackRateLimiter(new RedisRateLimiter(redis), memoryLimiter, logger) : memoryLimiter);
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
  return { config, clock, logger, store, sessionTokens, budget, upstream, catalogue, usageWriter, rateLimiter, redis };
}

/**
 * Waits (bounded) for connections that must be up before serving: with the offline queue
 * off, commands sent before Redis is ready fail. If Redis does not come up in time the
 * service starts anyway: rate limits fall back, budgets answer 503 until it is back.
 */
export async function connectDependencies(deps: Deps, timeoutMs = 5000): Promise<boolean> {
  const redis = deps.redis;
  if (!redis || redis.status === "ready") return true;
  const ready = await Promise.race([
    new Promise<boolean>((resolve) => redis.once("ready", () => resolve(true))),
    Bun.sleep(timeoutMs).then(() => false),
  ]);
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
  const { default: RedisClient } = require("ioredis") as { default: typeof Redis };
  const redis = new RedisClient(config.redisUrl!, {
    commandTimeout: config.redisCommandTimeoutMs,
    connectTimeout: Math.max(1000, config.redisCommandTimeoutMs * 4),
    enableOfflineQueue: false,
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
    // No served-request log: a demo server may run for days.
    const mock = createMockUpstream({ recordServed: false });
    const fetchMock: FetchUpstream = (url, init) => mock.fetch(new Request(url, init));
    return new UpstreamClient(fetchMock, DEMO_BASE_URL, "demo", config.upstreamTimeoutMs);
  }
  return new UpstreamClient((url, init) => fetch(url, init), config.upstreamBaseUrl, config.upstreamApiKey!, config.upstreamTimeoutMs);
}
