import type Redis from "ioredis";
import type { Logger } from "../../logger";
import type { Counters, CountersContext } from "../engine";
import { RedisBudgetLedger } from "./budget-ledger";
import { RedisRateLimiter } from "./rate-limiter";

export interface RedisOptions {
  /** REDIS_URL. */
  url: string;
  /** The deadline on every command (REDIS_COMMAND_TIMEOUT_MS). */
  commandTimeoutMs: number;
}

/**
 * The Redis engine's parts, on one client: the budget ledger (with its process lease,
 * ./process-lease.ts) and the rate limiter, shared by every process beside either store.
 * The store stays the durable ledger, and keeps the lease of each process's journal.
 */
export function redisCounters(options: RedisOptions, context: CountersContext): Counters {
  const redis = connectRedis(options, context.logger);
  const ledger = new RedisBudgetLedger(
    redis,
    { load: context.loadTruth, claimFirstEpoch: context.claimFirstCountersEpoch },
    context.logger,
    context.instanceId,
  );
  return {
    kind: "redis",
    ledger,
    limiter: new RedisRateLimiter(redis),
    limiterIsShared: true,
    // The reserve script runs the limiter's sliding-window step (./budget-ledger.ts RESERVE_WITH_RATE_LIMIT_LUA).
    foldsLimiterChecks: true,
    keepsInstanceLease: false,
    server: { name: "Redis", ready: () => redis.status === "ready" },
    start: async (timeoutMs) => {
      const ready = await waitUntilReady(redis, timeoutMs, context.logger);
      if (ready) void warnIfEvicting(redis, context.logger);
      return ready;
    },
    close: async () => {
      await ledger.close();
      redis.disconnect();
    },
  };
}

/**
 * With the offline queue off, commands sent before Redis is ready fail. If it does not come
 * up in time the service starts anyway: rate limits fall back, budgets answer 503 until it is back.
 */
async function waitUntilReady(redis: Redis, timeoutMs: number, logger: Logger): Promise<boolean> {
  if (redis.status === "ready") return true;
  const ready = await Promise.race([new Promise<boolean>((resolve) => redis.once("ready", () => resolve(true))), Bun.sleep(timeoutMs).then(() => false)]);
  if (!ready) logger.warn("Redis is not reachable yet; budgets answer 503 until it is", { timeoutMs });
  return ready;
}

/**
 * The counters are a store, not a cache: an account Redis evicts is rebuilt from the store
 * without the wait a lost epoch gets (src/store/redis/budget-scripts.ts), so a call reserved on
 * it just before could go uncounted. Says so at start when Redis may evict. Best effort: a
 * managed Redis may refuse CONFIG.
 */
export async function warnIfEvicting(redis: Redis, logger: Logger): Promise<void> {
  try {
    const [, policy] = (await redis.config("GET", "maxmemory-policy")) as [string, string];
    if (policy && policy !== "noeviction")
      logger.warn("Redis may evict keys (maxmemory-policy is not noeviction): set it to noeviction, budget counters must not be evicted", { policy });
  } catch (err) {
    logger.debug("could not read Redis's maxmemory-policy", { error: String(err) });
  }
}

/**
 * A Redis client that fails fast: no offline queue (a command while disconnected fails at
 * once instead of waiting), no per-command retries, and a deadline on every command.
 * It reconnects in the background by itself, so Redis coming back needs no restart.
 */
function connectRedis(options: RedisOptions, logger: Logger): Redis {
  // Loaded only when REDIS_URL is set: importing ioredis costs about 17 MB of resident
  // memory in a fresh process, about 3 MB in the bundle (ARCHITECTURE.md §7 "ioredis loaded
  // lazily"), which the embedded mode has no use for.
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a synchronous, lazy load (see above)
  const { default: RedisClient } = require("ioredis") as { default: typeof Redis };
  const redis = new RedisClient(options.url, {
    commandTimeout: options.commandTimeoutMs,
    connectTimeout: Math.max(1000, options.commandTimeoutMs * 4),
    enableOfflineQueue: false,
    // Commands issued in the same event-loop turn (many requests' reserves, limits and
    // settles) go out in one write: 11 % less CPU per JSON call (ARCHITECTURE.md §7 "Redis
    // auto-pipelining").
    enableAutoPipelining: true,
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(100 * attempt, 1000),
  });
  // Connection errors are reported by the limiter and the ledger when they matter; this
  // listener only keeps ioredis from printing every reconnect attempt.
  redis.on("error", (err) => logger.debug("redis connection error", { error: err.message }));
  return redis;
}
