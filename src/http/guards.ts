import type { Deps } from "../deps";
import { authPlugin } from "../auth/macro";
import { AdminTokenGuard, adminTokenPlugin } from "../auth/admin-token";
import { rateLimitPlugin } from "../ratelimit/macro";

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
        deps.budgetBackend.chatLimitFoldable ?? undefined,
      ),
    );
}

export type Guards = ReturnType<typeof guardsPlugin>;
