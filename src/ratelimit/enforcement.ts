/**
 * What a rate-limit decision does to a response (RateLimit-* headers, 429), and the chat
 * check a reservation may run in its place (DeferredRateLimit). The Elysia macro that
 * declares limits on routes is src/http/rate-limit-macro.ts.
 */
import { ApiError } from "../errors";
import type { RateLimitDecision, RateLimiter, RateLimitRule } from "./rate-limiter";

/**
 * A chat call's rate-limit check, left to its budget reservation when the ledger can run
 * both in one atomic step (Redis beside the Redis limiter): one round trip instead of two.
 * The reservation reports the decision with `decide`. A call that ends before reserving
 * (not connected, a model that cannot be priced, an idempotent replay) still counts: it is
 * checked on its own once answered. Only calls that reach the reservation can be refused
 * with 429 then, which is the point of the limit: calls that cannot reach the upstream
 * spend nothing.
 */
export class DeferredRateLimit {
  decided = false;

  constructor(
    readonly rule: RateLimitRule,
    readonly key: string,
    private readonly headers: Record<string, unknown>,
  ) {}

  /** Applies what the reservation's check said: the RateLimit-* headers, and 429 when refused. */
  decide(decision: RateLimitDecision): void {
    this.decided = true;
    applyRateLimitDecision(decision, this.rule, this.headers);
  }
}

/** Checks one rule, sets the RateLimit-* headers, and throws 429 when it is exhausted. */
export async function enforceRateLimit(limiter: RateLimiter, rule: RateLimitRule, key: string, headers: Record<string, unknown>): Promise<void> {
  applyRateLimitDecision(await limiter.check(rule, key), rule, headers);
}

/** Sets the RateLimit-* headers of a decision, and throws 429 when it refused. */
function applyRateLimitDecision(decision: RateLimitDecision, rule: RateLimitRule, headers: Record<string, unknown>): void {
  const resetSeconds = Math.max(1, Math.ceil(decision.resetMs / 1000));
  headers["ratelimit-limit"] = String(decision.limit);
  headers["ratelimit-remaining"] = String(decision.remaining);
  headers["ratelimit-reset"] = String(resetSeconds);
  if (!decision.allowed) {
    throw new ApiError(
      "rate_limited",
      `rate limit of ${decision.limit} requests per ${rule.windowMs / 1000} s reached; retry in ${resetSeconds} s`,
      {},
      {
        "retry-after": String(resetSeconds),
      },
    );
  }
}
