import type { Deps } from "../deps";
import { authPlugin } from "../auth/macro";
import { AdminTokenGuard, adminTokenPlugin } from "../auth/admin-token";
import { rateLimitPlugin } from "../ratelimit/macro";
import { FallbackRateLimiter } from "../ratelimit/fallback-rate-limiter";

/**
 * The route-level guards every resource plugin uses: `secretKey` / `session` auth,
 * `adminToken` for the operator's routes, and `rateLimit`. Built once per app and passed
 * to each route plugin.
 */
export function guardsPlugin(deps: Deps) {
  const { config } = deps;
  const admin = new AdminTokenGuard(config.adminToken, deps.rateLimiter, { name: "admin-auth", ...config.rateLimits.adminAuthFailures }, deps.clock);
  return authPlugin(deps.store, deps.sessionTokens)
    .use(adminTokenPlugin(admin))
    .use(
      rateLimitPlugin(
        deps.rateLimiter,
        {
          sessions: { name: "sessions", ...config.rateLimits.sessions },
          chat: { name: "chat", ...config.rateLimits.chat },
        },
        chatLimitDeferral(deps),
      ),
    );
}

export type Guards = ReturnType<typeof guardsPlugin>;

/**
 * Whether a chat call's rate limit can be checked inside its reservation: only when the
 * budget ledger and the limiter share one Redis, or one PostgreSQL (src/deps.ts builds both
 * on it), and while the limiter is not falling back to its in-process windows (the ledger
 * has no fallback; the limiter's own check is what notices the store is back).
 */
function chatLimitDeferral(deps: Deps): (() => boolean) | undefined {
  const limiter = deps.rateLimiter;
  if (!(limiter instanceof FallbackRateLimiter) || !deps.budget.foldsChecksOf?.(limiter.primary)) return undefined;
  return () => !limiter.degraded;
}
