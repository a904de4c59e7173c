import { Elysia } from "elysia";
import type { Store } from "../store";

const CONNECTIONS_PATH = "/api/v1/connections";
const ALLOWED_METHODS = "GET, POST, DELETE, OPTIONS";
const ALLOWED_HEADERS = "authorization, content-type";
/** A user's writes are rate limited (RL_USER_WRITES): the page that made them may read when to try again. */
const EXPOSED_HEADERS = "ratelimit-limit, ratelimit-remaining, ratelimit-reset, retry-after";

/**
 * CORS for /connections, the only endpoint browser code calls with a session token
 * (Fetch standard, "CORS protocol"). An origin is allowed when an active app registered
 * it. Once the token is verified the auth macro narrows that to the token's own app (see
 * src/auth/session-cors.ts). Responses vary by Origin so caches keep them apart.
 */
export function connectionsCors(store: Store) {
  return new Elysia()
    .onRequest(async ({ request, set }) => {
      const origin = request.headers.get("origin");
      if (!origin || !isConnectionsPath(request.url)) return;
      set.headers["vary"] = "Origin";
      if (!(await store.apps.isRegisteredOrigin(origin))) return;
      set.headers["access-control-allow-origin"] = origin;
      set.headers["access-control-expose-headers"] = EXPOSED_HEADERS;
    })
    .options(
      CONNECTIONS_PATH,
      ({ set }) => {
        set.status = 204;
        if (!set.headers["access-control-allow-origin"]) return;
        set.headers["access-control-allow-methods"] = ALLOWED_METHODS;
        set.headers["access-control-allow-headers"] = ALLOWED_HEADERS;
        set.headers["access-control-max-age"] = "600";
      },
      { detail: { hide: true } },
    );
}

function isConnectionsPath(url: string): boolean {
  const pathStart = url.indexOf("/", url.indexOf("//") + 2);
  const end = url.indexOf("?", pathStart);
  return url.slice(pathStart, end === -1 ? undefined : end) === CONNECTIONS_PATH;
}
