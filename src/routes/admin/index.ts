import { Elysia } from "elysia";
import type { Deps } from "../../deps";
import type { Guards } from "../../http/guards";
import { accessEntry } from "../../http/access-log";
import type { OperatorService } from "../../services/operator";
import { adminAppDataRoutes } from "./app-data";
import type { SettleBarrier } from "../../metering/meter";
import { adminAppRoutes } from "./apps";
import { adminWebhookRoutes } from "./webhooks";

export { NewAppRequest, AppUpdateRequest } from "./apps";
export { NewWebhookEndpointRequest } from "./webhooks";

/**
 * /admin: the operator's commands over HTTP, behind ADMIN_TOKEN (off without it). Every
 * route is a thin layer over the OperatorService, as the CLI is, so the two cannot drift.
 */
export function adminRoutes(deps: Deps, operator: OperatorService, auth: Guards, settles: SettleBarrier) {
  return (
    new Elysia({ prefix: "/admin" })
      // The access log says which app an operator's call touched (never the token).
      .onBeforeHandle(({ params, request }) => {
        // Routes without path parameters get no `params` at all.
        const appId = (params as { appId?: string } | undefined)?.appId;
        if (appId) accessEntry(request).appId = appId;
      })
      .use(adminAppRoutes(operator, auth))
      .use(adminAppDataRoutes(deps, operator, auth, settles))
      .use(adminWebhookRoutes(operator, auth))
  );
}
