import { Elysia } from "elysia";
import type { Deps } from "./deps";
import { guardsPlugin } from "./http/guards";
import { apiDocs } from "./http/api-docs";
import type { DocumentedBody, DocumentedContent, Documentation } from "./http/openapi-document";
import { errorHandler } from "./http/error-handler";
import { requestContext } from "./http/request-context";
import { BodyShapes, bodyShapeGuard } from "./http/body-shape";
import { ConnectionService } from "./services/connections";
import { UpstreamCreditReader } from "./services/upstream-credit";
import { connectionsCors } from "./routes/connections-cors";
import { ApproveRequest, connectionRoutes } from "./routes/connections";
import { healthRoutes } from "./routes/health";
import { SessionRequest, sessionRoutes } from "./routes/sessions";
import { statusRoutes } from "./routes/status";
import { ChatCompletionRequest, ChatCompletionStream, chatRoutes } from "./routes/chat";
import { usageRoutes } from "./routes/usage";
import { ChatService } from "./services/chat";
import { GrantService } from "./services/grants";
import { PayerBudgets } from "./services/budget-target";
import { IdempotencyService } from "./services/idempotency";
import { grantRoutes } from "./routes/grants";
import { ApproveConsentRequest, consentRoutes } from "./routes/grant-consent";
import { ClientAddresses } from "./request/client-address";
import { connectRoutes } from "./routes/connect";
import { FUNDING_CALLBACK_ROUTE, FundingStartRequest, fundingRoutes } from "./routes/funding";
import { demoUpstreamPage } from "./routes/demo-upstream";
import { FundingLinkService } from "./services/funding-link";
import { DemoUpstreamClient } from "./upstream/demo-upstream";
import { ConsentService } from "./services/grant-consent";
import { Meter, ownWritesVisible } from "./metering/meter";
import { InFlightCalls } from "./metering/in-flight-calls";
import { Reconciler } from "./metering/reconciler";
import { OverrunMonitor } from "./metering/overrun-monitor";
import { InvalidUsageMonitor } from "./metering/invalid-usage";
import { modelCatalogueRoutes } from "./routes/model-catalogue";
import { accessLog } from "./http/access-log";
import { createMetrics, metricsRoute } from "./http/metrics";
import { OperatorService } from "./services/operator";
import { AppUpdateRequest, adminRoutes, NewAppRequest, NewWebhookEndpointRequest } from "./routes/admin";
import { VERSION } from "./launch/help";

export const API_PREFIX = "/api/v1";

const DOCUMENTATION: Documentation = {
  info: {
    title: "Metered model proxy",
    // The service's own version (package.json): what the reference describes is this release's API.
    version: VERSION,
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
  { path: `${API_PREFIX}/connections/funding`, method: "post", schema: FundingStartRequest, required: true },
  { path: `${API_PREFIX}/chat/completions`, method: "post", schema: ChatCompletionRequest, required: true },
  { path: `${API_PREFIX}/grants/consent`, method: "post", schema: ApproveConsentRequest, required: true },
  { path: `${API_PREFIX}/admin/apps`, method: "post", schema: NewAppRequest, required: true },
  { path: `${API_PREFIX}/admin/apps/{appId}`, method: "patch", schema: AppUpdateRequest, required: true },
  { path: `${API_PREFIX}/admin/apps/{appId}/webhooks`, method: "post", schema: NewWebhookEndpointRequest, required: true },
];

const DOCUMENTED_CONTENT: DocumentedContent[] = [
  { path: `${API_PREFIX}/chat/completions`, method: "post", status: 200, mediaType: "text/event-stream", schema: ChatCompletionStream },
];

/**
 * Builds the HTTP app from its dependencies. No environment, no I/O: tests build many.
 * The one place that reads Deps whole: each service and route is handed the parts it uses.
 */
export function createApp(deps: Deps) {
  const { config, clock, logger, store, budget } = deps;
  const auth = guardsPlugin(deps);
  const meter = new Meter(budget, deps.usageWriter, clock, new OverrunMonitor(logger), new InvalidUsageMonitor(logger), (target) =>
    deps.budgetWatcher.note(target),
  );
  // Read-your-writes for this process's ledger reads: its settles under way, then its queued rows.
  const ownWrites = async () => ownWritesVisible(meter, deps.usageWriter);
  // A user's own upstream key, opened where it is used: a status read of its credit, a lookup of a call it paid.
  const openUserKey = async (appId: string, appUserId: string) => store.connections.userUpstreamKey(appId, appUserId);
  const upstreamCredit = new UpstreamCreditReader(deps.upstream, openUserKey, clock);
  const connections = new ConnectionService(store.connections, budget, meter, clock, config, store.apps, upstreamCredit);
  const callbackPath = `${new URL(config.publicUrl).pathname.replace(/\/$/, "")}${API_PREFIX}${FUNDING_CALLBACK_ROUTE}`;
  const funding = new FundingLinkService(connections, store.connections, store.fundingFlows, store.apps, deps.upstream, clock, logger, {
    callbackUrl: `${new URL(config.publicUrl).origin}${callbackPath}`,
    upstreamAuthUrl: config.upstreamAuthUrl,
  });
  const reserving = { catalogue: deps.catalogue, budget, clock, watcher: deps.budgetWatcher, config };
  const chat = new ChatService(reserving, deps.upstream, meter, new InFlightCalls(store.callJournal, deps.instanceId, clock), logger, config);
  const rowCost = async (requestId: string) => (await store.usageLedger.find(requestId))?.costNano ?? null;
  const reconciler = new Reconciler(
    store.callJournal,
    budget,
    meter,
    deps.upstream,
    clock,
    logger,
    deps.instanceId,
    config.reconcile,
    openUserKey,
    rowCost,
    () => deps.leaseContinuity.mayTakeOthers(),
  );
  const grants = new GrantService(store.grants, budget, meter, clock, config);
  const idempotency = new IdempotencyService(store.idempotencyKeys, clock, logger, config);
  const operator = new OperatorService(store, clock, undefined, { allowPrivateWebhookAddresses: config.webhooks.allowPrivateAddresses });
  const api = new Elysia({ prefix: API_PREFIX })
    .use(sessionRoutes(deps.sessionTokens, config.maxMonthlyUsd, auth))
    .use(connectionRoutes(connections, auth))
    .use(connectRoutes(store.apps, config.maxMonthlyUsd))
    .use(fundingRoutes(funding, auth, { callbackPath, secure: config.publicUrl.startsWith("https:") }))
    .use(statusRoutes(connections, auth))
    .use(chatRoutes(chat, new PayerBudgets(store.connections, grants, clock), idempotency, auth))
    .use(consentRoutes(new ConsentService(store.apps, store.grants, clock, config), deps.rateLimiter, config.rateLimits))
    .use(grantRoutes(grants, auth))
    .use(usageRoutes(store.usageLedger, clock, ownWrites, auth))
    .use(modelCatalogueRoutes(deps.catalogue, auth))
    .use(adminRoutes(operator, auth, ownWrites, logger));

  const metrics = createMetrics(deps, chat, reconciler);
  const bodyShapes = new BodyShapes();
  const app = new Elysia()
    .use(accessLog(logger, metrics ?? undefined))
    .use(requestContext(config.maxBodyBytes, new ClientAddresses(config.trustedProxies)))
    .use(config.demoMode && deps.upstream instanceof DemoUpstreamClient ? demoUpstreamPage(deps.upstream) : new Elysia())
    .use(errorHandler(logger))
    .use(bodyShapeGuard(bodyShapes))
    .use(connectionsCors(store))
    .use(apiDocs(API_PREFIX, { documentation: DOCUMENTATION, requestBodies: DOCUMENTED_BODIES, extraContent: DOCUMENTED_CONTENT }))
    .use(healthRoutes(deps, chat, meter.overruns))
    .use(metricsRoute(metrics, config.metricsToken))
    .use(api)
    .decorate("chat", chat)
    .decorate("reconciler", reconciler);
  bodyShapes.learn(app.routes);
  return app;
}

export type ProxyApp = ReturnType<typeof createApp>;
