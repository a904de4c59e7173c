import type { Clock } from "../clock";
import type { Config } from "../config";
import type { SessionTokens } from "../auth/session-token";
import type { RateLimiter } from "../ratelimit/rate-limiter";
import type { Store } from "../store";
import type { BudgetBackend } from "../store/engine";
import { authPlugin } from "./auth-macro";
import { AdminTokenGuard } from "../auth/admin-token";
import { adminTokenPlugin } from "./admin-token-macro";
import { rateLimitPlugin } from "./rate-limit-macro";

/**
 * The route-level guards every resource plugin uses: `secretKey` / `session` auth,
 * `adminToken` for the operator's routes, and `rateLimit`. Built once per app and passed
 * to each route plugin.
 */
/** What the guards are built from (src/deps.ts's Deps has each). */
export interface GuardSources {
  config: Config;
  clock: Clock;
  store: Pick<Store, "apps">;
  sessionTokens: SessionTokens;
  rateLimiter: RateLimiter;
  /** Whether a chat call's limit check can be left to its reservation now. */
  budgetBackend: Pick<BudgetBackend, "chatLimitFoldable">;
}

export function guardsPlugin(deps: GuardSources) {
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
          userWrites: { name: "user-writes", ...config.rateLimits.userWrites },
        },
        deps.budgetBackend.chatLimitFoldable ?? undefined,
      ),
    );
}

export type Guards = ReturnType<typeof guardsPlugin>;
