import { Elysia } from "elysia";
import type { Store } from "../store";
import type { App } from "../store/apps";
import type { SessionClaims, SessionTokens } from "../auth/session-token";
import { authenticateSecretKey, authenticateSession } from "../auth/credentials";
import { restrictCorsToApp } from "../auth/session-cors";
import type { RequestContext } from "../request/context";
import { requestContextSlot } from "../request/elysia";

/**
 * Route-level auth: `{ secretKey: true }` or `{ session: true }` on a route.
 *
 * Elysia parses and validates before `resolve`, which would let an unauthenticated caller
 * probe body schemas and make us parse bodies for strangers. So each macro also hooks
 * `parse` (runs first for requests with a body) and `transform` (runs before validation
 * for the rest). The first of them to run authenticates and keeps who is calling on the
 * request's context; the later ones, and `resolve` that hands it to the handler, find it
 * there. A refusal ends the request where it is thrown (an ApiError thrown in `parse`
 * reaches onError as the ParseError's cause), so only a success is ever kept.
 */
export function authPlugin(store: Pick<Store, "apps">, sessionTokens: SessionTokens) {
  const bySecretKey = async (context: RequestContext, request: Request): Promise<{ app: App; secretKeyId: string }> => {
    if (context.app && context.secretKeyId) return { app: context.app, secretKeyId: context.secretKeyId };
    const { app, keyId } = await authenticateSecretKey(store, request.headers.get("authorization"));
    context.authenticated(app, undefined, keyId);
    return { app, secretKeyId: keyId };
  };

  const bySession = async (context: RequestContext, request: Request): Promise<{ app: App; session: SessionClaims }> => {
    if (context.app && context.session) return { app: context.app, session: context.session };
    const found = await authenticateSession(store, sessionTokens, request.headers.get("authorization"));
    context.authenticated(found.app, found.session);
    return found;
  };

  // Unnamed on purpose: each createApp gets its own instance bound to its own store.
  return new Elysia().use(requestContextSlot).macro({
    secretKey: {
      async parse({ request, requestContext }) {
        await bySecretKey(requestContext, request);
      },
      async transform({ request, requestContext }) {
        await bySecretKey(requestContext, request);
      },
      resolve: async ({ request, requestContext }) => bySecretKey(requestContext, request),
    },
    session: {
      async parse({ request, requestContext }) {
        await bySession(requestContext, request);
      },
      async transform({ request, requestContext }) {
        await bySession(requestContext, request);
      },
      async resolve({ request, requestContext, set }) {
        const found = await bySession(requestContext, request);
        restrictCorsToApp(request, set.headers, found.app.origins);
        return found;
      },
    },
  });
}
