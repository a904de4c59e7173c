import type Redis from "ioredis";
import type { RateLimitDecision, RateLimiter, RateLimitRule } from "./rate-limiter";

/**
 * The same sliding-window log in Redis: one sorted set per key, scored by admission time
 * in ms. The whole check is one Lua script, so it is atomic across every process sharing
 * the Redis. Time comes from Redis (TIME), not from the callers' clocks; each admitted
 * request is a unique member; rejected requests are not added; keys expire by themselves
 * one window after their last admission.
 */
const SLIDING_WINDOW_LUA = `
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local member = ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
if count >= limit then
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  local reset = window
  if oldest[2] then reset = tonumber(oldest[2]) + window - now end
  if reset < 1 then reset = 1 end
  return {0, 0, reset}
end
redis.call('ZADD', key, now, member)
redis.call('PEXPIRE', key, window)
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
return {1, limit - count - 1, tonumber(oldest[2]) + window - now}
`;

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
    const [allowed, remaining, resetMs] = await command.call(this.redis, `rl:${rule.name}:${key}`, rule.limit, rule.windowMs, member);
    return { allowed: allowed === 1, limit: rule.limit, remaining, resetMs };
  }
}
