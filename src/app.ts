import { Elysia } from "elysia";
import type { Deps } from "./deps";
import { guardsPlugin } from "./http/guards";
import { apiDocs } from "./http/api-docs";
import type { DocumentedBody, DocumentedContent, Documentation } from "./http/openapi-document";
import { errorHandler } from "./http/error-handler";
import { requestContext } from "./http/request-context";
import { BodyShapes, bodyShapeGuard } from "./http/body-shape";
import { ConnectionService } from "./services/connections";
import { connectionsCors } from "./routes/connections-cors";
import { ApproveRequest, connectionRoutes } from "./routes/connections";
import { healthRoutes } from "./routes/health";
import { SessionRequest, sessionRoutes } from "./routes/sessions";
import { statusRoutes } from "./routes/status";
import { ChatCompletionRequest, ChatCompletionStream, chatRoutes } from "./routes/chat";
import { usageRoutes } from "./routes/usage";
import { ChatService } from "./services/chat";
import { GrantService } from "./services/grants";
import { IdempotencyService } from "./services/idempotency";
import { grantRoutes } from "./routes/grants";
import { ApproveConsentRequest, consentRoutes } from "./routes/grant-consent";
import { connectRoutes } from "./routes/connect";
import { ConsentService } from "./services/grant-consent";
import { Meter } from "./metering/meter";
import { InFlightCalls } from "./metering/in-flight-calls";
import { Reconciler } from "./metering/reconciler";
import { OverrunMonitor } from "./metering/overrun-monitor";
import { modelCatalogueRoutes } from "./routes/model-catalogue";
import { accessLog } from "./http/access-log";
import { createMetrics, metricsRoute } from "./http/metrics";
import { OperatorService } from "./services/operator";
import { AppUpdateRequest, adminRoutes, NewAppRequest, NewWebhookEndpointRequest } from "./routes/admin";

export const API_PREFIX = "/api/v1";

const DOCUMENTATION: Documentation = {
  info: {
    title: "Metered model proxy",
    version: "1",
    description:
      "OpenAI-compatible chat completions metered against budgets that end users approve. " +
      "Every error uses the envelope `{ error: { code, message } }` (components.schemas.Error).",
  },
  // Relative: the service answers at whatever address the operator runs it on.
  servers: [{ url: "/", description: "This service, at the address this document was fetched from." }],
  components: {
    securitySchemes: {
      secretKey: { type: "http", scheme: "bearer", description: "App secret key `sk_live_{appId}_{secret}` (backend only)." },
      sessionToken: { type: "http", scheme: "bearer", bearerFormat: "JWT", description: "Session token from POST /sessions (browser)." },
      metricsToken: { type: "http", scheme: "bearer", description: "The operator's METRICS_TOKEN." },
      adminToken: { type: "http", scheme: "bearer", description: "The operator's ADMIN_TOKEN (the admin API is off without it)." },
    },
  },
};

const DOCUMENTED_BODIES: DocumentedBody[] = [
  { path: `${API_PREFIX}/sessions`, method: "post", schema: SessionRequest, required: true },
  { path: `${API_PREFIX}/connections`, method: "post", schema: ApproveRequest, required: false },
  { path: `${API_PREFIX}/chat/completions`, method: "post", schema: ChatCompletionRequest, required: true },
  { path: `${API_PREFIX}/grants/consent`, method: "post", schema: ApproveConsentRequest, required: true },
  { path: `${API_PREFIX}/admin/apps`, method: "post", schema: NewAppRequest, required: true },
  { path: `${API_PREFIX}/admin/apps/{appId}`, method: "patch", schema: AppUpdateRequest, required: true },
  { path: `${API_PREFIX}/admin/apps/{appId}/webhooks`, method: "post", schema: NewWebhookEndpointRequest, required: true },
];

const DOCUMENTED_CONTENT: DocumentedContent[] = [
  { path: `${API_PREFIX}/chat/completions`, method: "post", status: 200, mediaType: "text/event-stream", schema: ChatCompletionStream },
];

/** Builds the HTTP app from its dependencies. No environment, no I/O: tests build many. */
export function createApp(deps: Deps) {
  const auth = guardsPlugin(deps);
  const meter = new Meter(deps.budget, deps.usageWriter, deps.clock, new OverrunMonitor(deps.logger), (target) => deps.budgetWatcher.note(target));
  const connections = new ConnectionService(deps, meter);
  const chat = new ChatService(deps, deps.upstream, deps.catalogue, meter, new InFlightCalls(deps.store.callJournal, deps.instanceId, deps.clock));
  const reconciler = new Reconciler(deps.store.callJournal, deps.budget, meter, deps.upstream, deps.clock, deps.logger, deps.instanceId, deps.config.reconcile);
  const grants = new GrantService(deps, meter);
  const idempotency = new IdempotencyService(deps, deps.store.idempotencyKeys);
  const operator = new OperatorService(deps.store, deps.clock, undefined, { allowPrivateWebhookAddresses: deps.config.webhooks.allowPrivateAddresses });
  const api = new Elysia({ prefix: API_PREFIX })
    .use(sessionRoutes(deps, auth))
    .use(connectionRoutes(connections, auth))
    .use(connectRoutes(deps))
    .use(statusRoutes(connections, auth))
    .use(chatRoutes(deps, chat, grants, idempotency, auth))
    .use(consentRoutes(deps, new ConsentService(deps)))
    .use(grantRoutes(grants, auth))
    .use(usageRoutes(deps, auth, meter))
    .use(modelCatalogueRoutes(deps, auth))
    .use(adminRoutes(deps, operator, auth, meter));

  const metrics = createMetrics(deps, chat, reconciler);
  const bodyShapes = new BodyShapes();
  const app = new Elysia()
    .use(accessLog(deps.logger, metrics ?? undefined))
    .use(requestContext(deps.config.maxBodyBytes))
    .use(errorHandler(deps.logger))
    .use(bodyShapeGuard(bodyShapes))
    .use(connectionsCors(deps.store))
    .use(apiDocs(API_PREFIX, { documentation: DOCUMENTATION, requestBodies: DOCUMENTED_BODIES, extraContent: DOCUMENTED_CONTENT }))
    .use(healthRoutes(deps, chat, meter.overruns))
    .use(metricsRoute(metrics, deps.config.metricsToken))
    .use(api)
    .decorate("chat", chat)
    .decorate("reconciler", reconciler);
  bodyShapes.learn(app.routes);
  return app;
}

export type ProxyApp = ReturnType<typeof createApp>;
