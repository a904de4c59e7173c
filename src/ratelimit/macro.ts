import { Elysia } from "elysia";
import { ApiError } from "../errors";
import { requestContextSlot } from "../request/elysia";
import type { RequestContext } from "../request/context";
import type { RateLimitDecision, RateLimiter, RateLimitRule } from "./rate-limiter";

export type RateLimitedRoute = "sessions" | "chat";

/** Who a rule counts: per app for sessions, per app and payer (user or grant) for chat. */
function keyOf(route: RateLimitedRoute, context: RequestContext): string {
  const app = context.app;
  if (!app) throw new Error("rateLimit needs an authenticated app: declare secretKey on the route");
  return route === "chat" ? `${app.id}:${context.payer.key}` : app.id;
}

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

/**
 * `{ rateLimit: "chat" }` on a route that also declares `secretKey: true`. Runs after auth
 * (it needs the app) and before the handler. Sets the RateLimit-* fields of the IETF
 * draft "RateLimit header fields for HTTP" on every limited response, success and 429
 * alike, plus Retry-After (RFC 9110 §10.2.3) in whole seconds on 429.
 *
 * `deferChat()`, when given, says whether a chat check can be left to the reservation now
 * (see DeferredRateLimit); while the shared limiter is down it cannot, and the check runs
 * here. Without it (no ledger that can run the check) the routes get no after-response hook.
 */
export function rateLimitPlugin(limiter: RateLimiter, rules: Record<RateLimitedRoute, RateLimitRule>, deferChat?: () => boolean) {
  return new Elysia().use(requestContextSlot).macro({
    rateLimit: (route: RateLimitedRoute) => {
      const deferrable = route === "chat" && deferChat !== undefined;
      return {
        // A resolve, not a beforeHandle: a deferred check is handed to the route's handler
        // (`deferredRateLimit`) for its reservation to run.
        async resolve({ requestContext, set }): Promise<{ deferredRateLimit: DeferredRateLimit | undefined }> {
          const key = keyOf(route, requestContext);
          if (deferrable && deferChat!()) return { deferredRateLimit: new DeferredRateLimit(rules[route], key, set.headers) };
          await enforceRateLimit(limiter, rules[route], key, set.headers);
          return { deferredRateLimit: undefined };
        },
        ...(deferrable && {
          afterResponse(context) {
            // What this macro's resolve handed the route (Elysia types it for the handler only).
            const deferred = (context as { deferredRateLimit?: DeferredRateLimit }).deferredRateLimit;
            // Never reached its reservation (or the reservation failed): count the call now.
            if (deferred && !deferred.decided) void limiter.check(deferred.rule, deferred.key).catch(() => {});
          },
        }),
      };
    },
  });
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
