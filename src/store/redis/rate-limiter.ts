import type Redis from "ioredis";
import type { RateLimitDecision, RateLimiter, RateLimitRule } from "../../ratelimit/rate-limiter";

/**
 * The same sliding-window log in Redis: one sorted set per key, scored by admission time
 * in ms. The whole check is one Lua script, so it is atomic across every process sharing
 * the Redis. Time comes from Redis (TIME), not from the callers' clocks; each admitted
 * request is a unique member; rejected requests are not added; keys expire by themselves
 * one window after their last admission.
 *
 * The step itself is a fragment: the budget ledger's reserve script runs it too, so that a
 * chat call's limit and reservation take one round trip (./budget-ledger.ts).
 * It reads the locals rlKey, rlLimit, rlWindow and rlMember and sets rlAllowed (1 or 0),
 * rlRemaining and rlReset (ms until the window has room again).
 */
export const SLIDING_WINDOW_STEP = `
local rlTime = redis.call('TIME')
local rlNow = tonumber(rlTime[1]) * 1000 + math.floor(tonumber(rlTime[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', rlKey, '-inf', rlNow - rlWindow)
local rlCount = redis.call('ZCARD', rlKey)
local rlAllowed, rlRemaining, rlReset = 1, 0, rlWindow
if rlCount >= rlLimit then
  rlAllowed = 0
  local oldest = redis.call('ZRANGE', rlKey, 0, 0, 'WITHSCORES')
  if oldest[2] then rlReset = tonumber(oldest[2]) + rlWindow - rlNow end
  if rlReset < 1 then rlReset = 1 end
else
  redis.call('ZADD', rlKey, rlNow, rlMember)
  redis.call('PEXPIRE', rlKey, rlWindow)
  local oldest = redis.call('ZRANGE', rlKey, 0, 0, 'WITHSCORES')
  rlRemaining = rlLimit - rlCount - 1
  rlReset = tonumber(oldest[2]) + rlWindow - rlNow
end
`;

const SLIDING_WINDOW_LUA = `
local rlKey, rlLimit, rlWindow, rlMember = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
${SLIDING_WINDOW_STEP}
return {rlAllowed, rlRemaining, rlReset}
`;

/** The Redis key of one rule's window for one caller. */
export const rateLimitKeyOf = (rule: RateLimitRule, key: string) => `rl:${rule.name}:${key}`;

type SlidingWindowCommand = (key: string, limit: number, windowMs: number, member: string) => Promise<[number, number, number]>;

export class RedisRateLimiter implements RateLimiter {
  readonly kind = "redis";
  private counter = 0;
  private readonly memberPrefix = crypto.randomUUID();

  constructor(private readonly redis: Redis) {
    // defineCommand sends EVALSHA and falls back to EVAL (re-loading the script) on NOSCRIPT,
    // e.g. after a Redis restart or SCRIPT FLUSH.
    if (!("slidingWindowCheck" in redis)) redis.defineCommand("slidingWindowCheck", { numberOfKeys: 1, lua: SLIDING_WINDOW_LUA });
  }

  async check(rule: RateLimitRule, key: string): Promise<RateLimitDecision> {
    const command = (this.redis as unknown as { slidingWindowCheck: SlidingWindowCommand }).slidingWindowCheck;
    const member = `${this.memberPrefix}:${this.counter++}`;
    const [allowed, remaining, resetMs] = await command.call(this.redis, rateLimitKeyOf(rule, key), rule.limit, rule.windowMs, member);
    return { allowed: allowed === 1, limit: rule.limit, remaining, resetMs };
  }
}
