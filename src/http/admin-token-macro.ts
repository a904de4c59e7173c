import { Elysia } from "elysia";
import type { AdminTokenGuard } from "../auth/admin-token";
import type { RequestContext } from "../request/context";
import { requestContextSlot } from "../request/elysia";
import { clientKey } from "../request/client-address";

/**
 * `{ adminToken: true }` on a route. Like the app credentials' macro (auth-macro.ts), it
 * runs in `parse` and `transform`, before any body is read or validated for a stranger.
 * The first hook to run decides: a refusal ends the request, a pass is kept on the
 * request's context (`operator`) and the later hooks find it there.
 */
export function adminTokenPlugin(guard: AdminTokenGuard) {
  const check = async (context: RequestContext, request: Request): Promise<void> => {
    if (context.operator) return;
    await guard.check(request.headers.get("authorization"), clientKey(context.clientAddress));
    context.operator = true;
  };
  return new Elysia().use(requestContextSlot).macro({
    adminToken: {
      async parse({ request, requestContext }) {
        await check(requestContext, request);
      },
      async transform({ request, requestContext }) {
        await check(requestContext, request);
      },
      async beforeHandle({ request, requestContext }) {
        await check(requestContext, request);
      },
    },
  });
}
