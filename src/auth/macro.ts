import { Elysia } from "elysia";
import type { Deps } from "../deps";
import type { App } from "../store/apps";
import type { SessionClaims } from "./session-token";
import { authenticateSecretKey, authenticateSession } from "./credentials";
import { restrictCorsToApp } from "./session-cors";
import { accessEntry } from "../http/access-log";

type SecretKeyAuth = { app: App };
type SessionAuth = { app: App; session: SessionClaims };

/**
 * Route-level auth: `{ secretKey: true }` or `{ session: true }` on a route.
 *
 * Elysia parses and validates before `resolve`, which would let an unauthenticated caller
 * probe body schemas and make us parse bodies for strangers. So each macro also hooks
 * `parse` (runs first for requests with a body) and `transform` (runs before validation
 * for the rest); the result is remembered per request and `resolve` hands it to the
 * handler. An ApiError thrown in `parse` reaches onError as the ParseError's cause.
 */
export function authPlugin(deps: Deps) {
  const secretKeyAuth = new WeakMap<Request, Promise<SecretKeyAuth>>();
  const sessionAuth = new WeakMap<Request, Promise<SessionAuth>>();

  const bySecretKey = async (request: Request): Promise<SecretKeyAuth> => {
    let found = secretKeyAuth.get(request);
    if (!found) {
      found = authenticateSecretKey(deps.store, request.headers.get("authorization")).then((app) => {
        accessEntry(request).appId = app.id;
        return { app };
      });
      secretKeyAuth.set(request, found);
    }
    return found;
  };

  const bySession = async (request: Request): Promise<SessionAuth> => {
    let found = sessionAuth.get(request);
    if (!found) {
      found = authenticateSession(deps.store, deps.sessionTokens, request.headers.get("authorization")).then((auth) => {
        Object.assign(accessEntry(request), { appId: auth.app.id, appUserId: auth.session.appUserId });
        return auth;
      });
      sessionAuth.set(request, found);
    }
    return found;
  };

  // Unnamed on purpose: each createApp gets its own instance bound to its own deps.
  return new Elysia().macro({
    secretKey: {
      async parse({ request }) {
        await bySecretKey(request);
      },
      async transform({ request }) {
        await bySecretKey(request);
      },
      resolve: async ({ request }) => bySecretKey(request),
    },
    session: {
      async parse({ request }) {
        await bySession(request);
      },
      async transform({ request }) {
        await bySession(request);
      },
      async resolve({ request, set }) {
        const found = await bySession(request);
        restrictCorsToApp(request, set.headers, found.app.origins);
        return found;
      },
    },
  });
}
