import { Elysia } from "elysia";
import { createHash } from "node:crypto";
import { ApiError } from "../errors";
import type { App } from "../store/apps";
import type { RateLimiter, RateLimitRule } from "./rate-limiter";

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
 * `{ rateLimit: "chat" }` on a route that also declares `secretKey: true`. Runs after auth
 * (it needs the app) and before the handler. Sets the RateLimit-* fields of the IETF
 * draft "RateLimit header fields for HTTP" on every limited response, success and 429
 * alike, plus Retry-After (RFC 9110 §10.2.3) in whole seconds on 429.
 */
export function rateLimitPlugin(limiter: RateLimiter, rules: Record<RateLimitedRoute, RateLimitRule>) {
  return new Elysia().macro({
    rateLimit: (route: RateLimitedRoute) => ({
      async beforeHandle({ request, set, ...context }) {
        const app = (context as unknown as { app?: App }).app;
        if (!app) throw new Error("rateLimit needs an authenticated app: declare secretKey on the route");
        await enforceRateLimit(limiter, rules[route], KEY_OF[route](app, request), set.headers);
      },
    }),
  });
}

/** Checks one rule, sets the RateLimit-* headers, and throws 429 when it is exhausted. */
export async function enforceRateLimit(limiter: RateLimiter, rule: RateLimitRule, key: string, headers: Record<string, unknown>): Promise<void> {
  const decision = await limiter.check(rule, key);
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
