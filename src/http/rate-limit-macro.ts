import { Elysia } from "elysia";
import { requestContextSlot } from "../request/elysia";
import type { RequestContext } from "../request/context";
import type { RateLimiter, RateLimitRule } from "../ratelimit/rate-limiter";
import { DeferredRateLimit, enforceRateLimit } from "../ratelimit/enforcement";

export type RateLimitedRoute = "sessions" | "chat" | "userWrites";

/**
 * Who a rule counts: per app for sessions, per app and payer (user or grant) for chat, per
 * app and the session token's user for a user's writes.
 */
function keyOf(route: RateLimitedRoute, context: RequestContext): string {
  const app = context.app;
  if (!app) throw new Error("rateLimit needs an authenticated app: declare secretKey or session on the route");
  if (route === "chat") return `${app.id}:${context.payer.key}`;
  if (route !== "userWrites") return app.id;
  if (!context.session) throw new Error("rateLimit userWrites needs a session token: declare session on the route");
  return `${app.id}:${context.session.appUserId}`;
}

/**
 * `{ rateLimit: "chat" }` on a route that also declares `secretKey: true` (`"userWrites"`:
 * `session: true`). Runs after auth
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
