import { Elysia } from "elysia";
import type { Guards } from "../../http/guards";
import type { Logger } from "../../logger";
import { requestContextSlot } from "../../request/elysia";
import type { OperatorService } from "../../services/operator";
import { adminAppDataRoutes } from "./app-data";
import { adminAppRoutes } from "./apps";
import { adminWebhookRoutes } from "./webhooks";

export { NewAppRequest, AppUpdateRequest } from "./apps";
export { NewWebhookEndpointRequest } from "./webhooks";

/**
 * /admin: the operator's commands over HTTP, behind ADMIN_TOKEN (off without it). Every
 * route is a thin layer over the OperatorService, as the CLI is, so the two cannot drift.
 */
export function adminRoutes(operator: OperatorService, auth: Guards, ownWritesVisible: () => Promise<void>, logger: Logger) {
  return (
    new Elysia({ prefix: "/admin" })
      .use(requestContextSlot)
      // The access log says which app an operator's call touched (never the token).
      .onBeforeHandle(({ params, requestContext }) => {
        // Routes without path parameters get no `params` at all.
        const appId = (params as { appId?: string } | undefined)?.appId;
        if (appId) requestContext.log.appId = appId;
      })
      .use(adminAppRoutes(operator, auth))
      .use(adminAppDataRoutes(operator, auth, ownWritesVisible, logger))
      .use(adminWebhookRoutes(operator, auth))
  );
}
