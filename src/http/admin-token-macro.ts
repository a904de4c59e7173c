import { Elysia } from "elysia";
import type { AdminTokenGuard } from "../auth/admin-token";
import type { RequestContext } from "../request/context";
import { requestContextSlot } from "../request/elysia";

/**
 * `{ adminToken: true }` on a route. Like the app credentials' macro (auth-macro.ts), it
 * runs in `parse` and `transform`, before any body is read or validated for a stranger.
 * The first hook to run decides: a refusal ends the request, a pass is kept on the
 * request's context (`operator`) and the later hooks find it there.
 */
export function adminTokenPlugin(guard: AdminTokenGuard) {
  type Server = { requestIP(request: Request): { address: string } | null } | null;
  const check = async (context: RequestContext, request: Request, server: Server): Promise<void> => {
    if (context.operator) return;
    await guard.check(request.headers.get("authorization"), server?.requestIP(request)?.address ?? "unknown");
    context.operator = true;
  };
  return new Elysia().use(requestContextSlot).macro({
    adminToken: {
      async parse({ request, requestContext, server }) {
        await check(requestContext, request, server);
      },
      async transform({ request, requestContext, server }) {
        await check(requestContext, request, server);
      },
      async beforeHandle({ request, requestContext, server }) {
        await check(requestContext, request, server);
      },
    },
  });
}
