import { Elysia } from "elysia";
import { createHash } from "node:crypto";
import { ApiError } from "../errors";
import type { App } from "../store/apps";
import type { RateLimitDecision, RateLimiter, RateLimitRule } from "./rate-limiter";

export type RateLimitedRoute = "sessions" | "chat";

/** Who a rule counts: per app for sessions, per app and user (or grant) for chat. */
const KEY_OF: Record<RateLimitedRoute, (app: App, request: Request) => string> = {
  sessions: (app) => app.id,
  chat: (app, request) => {
    const grant = request.headers.get("x-service-grant");
    // A digest, not the token: secrets never become Redis key names.
    return `${app.id}:${grant ? `grant:${createHash("sha256").update(grant).digest("base64url").slice(0, 22)}` : `user:${request.headers.get("x-service-user") ?? ""}`}`;
  },
};

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

const deferredChecks = new WeakMap<Request, DeferredRateLimit>();

/** The chat call's deferred rate-limit check, for its reservation to run; undefined when it was checked already. */
export function deferredRateLimitOf(request: Request): DeferredRateLimit | undefined {
  return deferredChecks.get(request);
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
  return new Elysia().macro({
    rateLimit: (route: RateLimitedRoute) => {
      const deferrable = route === "chat" && deferChat !== undefined;
      return {
        async beforeHandle(context) {
          const { request, set } = context;
          const app = (context as unknown as { app?: App }).app;
          if (!app) throw new Error("rateLimit needs an authenticated app: declare secretKey on the route");
          const key = KEY_OF[route](app, request);
          if (deferrable && deferChat!()) {
            deferredChecks.set(request, new DeferredRateLimit(rules[route], key, set.headers));
            return;
          }
          await enforceRateLimit(limiter, rules[route], key, set.headers);
        },
        ...(deferrable && {
          afterResponse({ request }: { request: Request }) {
            const deferred = deferredChecks.get(request);
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
