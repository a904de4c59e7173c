import { Elysia, t } from "elysia";
import type { Guards } from "../../http/guards";
import type { OperatorService } from "../../services/operator";
import { CreatedWebhookEndpointView, RemovedWebhookEndpointView, WebhookDeliveryView, WebhookEndpointView } from "../../services/operator/views";
import { WEBHOOK_EVENT_TYPES } from "../../store/webhooks";
import { adminDetail, adminErrors, AppParams } from "./shared";

const EndpointParams = t.Object({ ...AppParams.properties, endpointId: t.String({ maxLength: 64 }) });

export const NewWebhookEndpointRequest = t.Object({
  url: t.String({ maxLength: 2048, description: "https, or http to localhost (development)." }),
  events: t.Optional(
    t.Array(t.Union(WEBHOOK_EVENT_TYPES.map((type) => t.Literal(type))), { description: "The event types to send; left out or empty: all of them." }),
  ),
});

const DeliveriesQuery = t.Object({
  limit: t.Optional(t.Integer({ minimum: 1, maximum: 1000, description: "Newest first; default 50." })),
  endpointId: t.Optional(t.String({ maxLength: 64, description: "Only this endpoint's." })),
});

/** /admin/apps/{appId}/webhooks: the operator's `webhook` commands (src/cli/webhook-commands.ts) over HTTP. */
export function adminWebhookRoutes(operator: OperatorService, auth: Guards) {
  return new Elysia({ prefix: "/apps/:appId/webhooks" })
    .use(auth)
    .post(
      "",
      async ({ params, body, set }) => {
        set.status = 201;
        return operator.webhooks.add(params.appId, body);
      },
      {
        adminToken: true,
        params: AppParams,
        body: NewWebhookEndpointRequest,
        response: { 201: CreatedWebhookEndpointView, ...adminErrors(400, 413) },
        detail: adminDetail("Register a webhook endpoint", "The signing secret is in this response only."),
      },
    )
    .get("", async ({ params }) => ({ data: await operator.webhooks.list(params.appId) }), {
      adminToken: true,
      params: AppParams,
      response: { 200: t.Object({ data: t.Array(WebhookEndpointView) }), ...adminErrors() },
      detail: adminDetail("An app's webhook endpoints (no secrets)"),
    })
    .get("/deliveries", async ({ params, query }) => ({ data: await operator.webhooks.deliveries(params.appId, query.limit ?? 50, query.endpointId) }), {
      adminToken: true,
      params: AppParams,
      query: DeliveriesQuery,
      response: { 200: t.Object({ data: t.Array(WebhookDeliveryView) }), ...adminErrors(400) },
      detail: adminDetail("An app's latest webhook deliveries: state, attempts, last status and error"),
    })
    .delete("/:endpointId", async ({ params }) => operator.webhooks.remove(params.appId, params.endpointId), {
      adminToken: true,
      params: EndpointParams,
      response: { 200: RemovedWebhookEndpointView, ...adminErrors() },
      detail: adminDetail("Delete a webhook endpoint and its pending deliveries"),
    })
    .post("/:endpointId/disable", async ({ params }) => operator.webhooks.disable(params.appId, params.endpointId), {
      adminToken: true,
      params: EndpointParams,
      response: { 200: WebhookEndpointView, ...adminErrors() },
      detail: adminDetail("Stop sending to a webhook endpoint (its pending deliveries fail)"),
    })
    .post("/:endpointId/enable", async ({ params }) => operator.webhooks.enable(params.appId, params.endpointId), {
      adminToken: true,
      params: EndpointParams,
      response: { 200: WebhookEndpointView, ...adminErrors() },
      detail: adminDetail("Send to a webhook endpoint again (e.g. after it answered 410 Gone)"),
    });
}
