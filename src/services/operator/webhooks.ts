import { WEBHOOK_EVENT_TYPES, type DeliveryRecord, type WebhookEndpoint, type WebhookEventType } from "../../store/webhooks";
import { invalid, isoOrNull, isoTime, notFound, requireApp, type OperatorContext } from "./input";
import type { CreatedWebhookEndpointView, RemovedWebhookEndpointView, WebhookDeliveryView, WebhookEndpointView } from "./views";
import { isIpLiteral, isLocalhostName, isLoopbackHost, specialUseRange } from "../../webhooks/special-addresses";
import { endpointSecretOpens } from "../../store/webhook-rows";

const ALLOW_SETTING = "WEBHOOK_ALLOW_PRIVATE_ADDRESSES=true";

/** Webhook endpoints (ARCHITECTURE.md §6): register, list, disable, enable, remove; and their deliveries. */
export class WebhookOperations {
  constructor(private readonly context: OperatorContext) {}

  /** Registers an endpoint; the answer is the only time its signing secret is shown. */
  async add(appId: string, input: { url: string; events?: string[] }): Promise<CreatedWebhookEndpointView> {
    await requireApp(this.context, appId);
    const endpoint = await this.context.store.webhooks.createEndpoint(
      appId,
      this.receiverUrl(input.url),
      this.eventTypes(input.events),
      this.context.clock.now(),
    );
    return { ...endpointView(endpoint, "readable"), secret: endpoint.secret };
  }

  async list(appId: string): Promise<WebhookEndpointView[]> {
    await requireApp(this.context, appId);
    return this.views(await this.context.store.webhooks.listEndpoints(appId));
  }

  async remove(appId: string, endpointId: string): Promise<RemovedWebhookEndpointView> {
    if (!(await this.context.store.webhooks.deleteEndpoint(appId, endpointId))) throw missing(appId, endpointId);
    return { endpointId, removed: true };
  }

  /** Stops sending to it; its pending deliveries fail. */
  async disable(appId: string, endpointId: string): Promise<WebhookEndpointView> {
    await this.find(appId, endpointId);
    await this.context.store.webhooks.disableEndpoint(endpointId, "operator", this.context.clock.now());
    return (await this.views([await this.find(appId, endpointId)]))[0]!;
  }

  async enable(appId: string, endpointId: string): Promise<WebhookEndpointView> {
    const endpoint = await this.context.store.webhooks.enableEndpoint(appId, endpointId);
    if (!endpoint) throw missing(appId, endpointId);
    return (await this.views([endpoint]))[0]!;
  }

  /** The app's latest deliveries, newest first. */
  async deliveries(appId: string, limit: number, endpointId?: string): Promise<WebhookDeliveryView[]> {
    await requireApp(this.context, appId);
    if (!(Number.isSafeInteger(limit) && limit >= 1 && limit <= 1000)) throw invalid(`${this.context.names.limit} must be a whole number from 1 to 1000`);
    return (await this.context.store.webhooks.listDeliveries(appId, limit, endpointId)).map(deliveryView);
  }

  /** The endpoints' views, each saying whether its signing secret opens with the keys of this process. */
  private async views(endpoints: WebhookEndpoint[]): Promise<WebhookEndpointView[]> {
    const { store } = this.context;
    const stored = new Map((await store.webhooks.storedSecrets()).map((s) => [s.endpointId, s.stored]));
    return endpoints.map((e) => {
      const secret = stored.get(e.id);
      return endpointView(e, secret === undefined || endpointSecretOpens(store.secrets, e.id, secret) ? "readable" : "unreadable");
    });
  }

  private async find(appId: string, endpointId: string): Promise<WebhookEndpoint> {
    const endpoint = (await this.context.store.webhooks.listEndpoints(appId)).find((e) => e.id === endpointId);
    if (!endpoint) throw missing(appId, endpointId);
    return endpoint;
  }

  /**
   * https, or http to this machine only, and only where private addresses are allowed (a
   * receiver in development): the payloads name users and their budgets, so they never
   * cross a network in clear. A host that is a non-public IP address or a localhost name is
   * refused unless private addresses are allowed; a name that resolves to one is refused at
   * each delivery (src/webhooks/attempt.ts), since what a name resolves to can change. A user
   * name or password in the URL is refused: URLs are shown in listings and logs.
   */
  private receiverUrl(raw: string): string {
    const name = this.context.names.url;
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw invalid(`${name} ${JSON.stringify(raw)} is not a URL`);
    }
    if (url.username || url.password) throw invalid(`${name} may not carry a user name or password`);
    const allowPrivate = this.context.allowPrivateWebhookAddresses;
    const range = isIpLiteral(url.hostname) ? specialUseRange(url.hostname) : isLocalhostName(url.hostname) ? "loopback" : null;
    if (range !== null && !allowPrivate)
      throw invalid(`${name} points at a ${range} address; webhooks go to public addresses only (${ALLOW_SETTING} for local development)`);
    // A loopback host got here only if private addresses are allowed (refused just above otherwise).
    if (url.protocol === "https:" || (url.protocol === "http:" && isLoopbackHost(url.hostname))) return url.href;
    throw invalid(`${name} must be https (http only to this machine, with ${ALLOW_SETTING} for local development)`);
  }

  private eventTypes(raw: string[] | undefined): WebhookEventType[] | null {
    if (!raw || raw.length === 0) return null;
    const unknown = raw.find((type) => !(WEBHOOK_EVENT_TYPES as readonly string[]).includes(type));
    if (unknown !== undefined)
      throw invalid(`${this.context.names.events}: unknown event type ${JSON.stringify(unknown)}; known: ${WEBHOOK_EVENT_TYPES.join(", ")}`);
    return [...new Set(raw)] as WebhookEventType[];
  }
}

const missing = (appId: string, endpointId: string) => notFound(`no webhook endpoint ${endpointId} for app ${appId}`);

const endpointView = (e: WebhookEndpoint, secretState: WebhookEndpointView["secretState"]): WebhookEndpointView => ({
  endpointId: e.id,
  appId: e.appId,
  url: e.url,
  events: e.eventTypes ?? "all",
  createdAt: isoTime(e.createdAt),
  disabledAt: isoOrNull(e.disabledAt),
  disabledReason: e.disabledReason,
  secretState,
});

const deliveryView = (d: DeliveryRecord): WebhookDeliveryView => ({
  eventId: d.eventId,
  endpointId: d.endpointId,
  type: d.type,
  state: d.state,
  attempts: d.attempts,
  nextAttemptAt: isoOrNull(d.nextAttemptAt),
  lastStatus: d.lastStatus,
  lastError: d.lastError,
  createdAt: isoTime(d.createdAt),
  finishedAt: isoOrNull(d.finishedAt),
});
