import type { Deps } from "../deps";
import { authPlugin } from "../auth/macro";
import { rateLimitPlugin } from "../ratelimit/macro";

/**
 * The route-level guards every resource plugin uses: `secretKey` / `session` auth and
 * `rateLimit`. Built once per app and passed to each route plugin.
 */
export function guardsPlugin(deps: Deps) {
  return authPlugin(deps).use(
    rateLimitPlugin(deps.rateLimiter, {
      sessions: { name: "sessions", ...deps.config.rateLimits.sessions },
      chat: { name: "chat", ...deps.config.rateLimits.chat },
    }),
  );
}

export type Guards = ReturnType<typeof guardsPlugin>;
