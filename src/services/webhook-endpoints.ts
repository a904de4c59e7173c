import { ApiError } from "../errors";
import type { Store } from "../store";
import { WEBHOOK_EVENT_TYPES, type DeliveryRecord, type WebhookEndpoint, type WebhookEventType } from "../store/webhooks";

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** How an endpoint is shown: never with its secret, which is shown once, when it is created. */
export interface EndpointView {
  endpointId: string;
  appId: string;
  url: string;
  events: WebhookEventType[] | "all";
  createdAt: string;
  disabledAt: string | null;
  disabledReason: string | null;
}

export const endpointView = (e: WebhookEndpoint): EndpointView => ({
  endpointId: e.id,
  appId: e.appId,
  url: e.url,
  events: e.eventTypes ?? "all",
  createdAt: iso(e.createdAt)!,
  disabledAt: iso(e.disabledAt),
  disabledReason: e.disabledReason,
});

export const deliveryView = (d: DeliveryRecord) => ({
  eventId: d.eventId,
  endpointId: d.endpointId,
  type: d.type,
  state: d.state,
  attempts: d.attempts,
  nextAttemptAt: iso(d.nextAttemptAt),
  lastStatus: d.lastStatus,
  lastError: d.lastError,
  createdAt: iso(d.createdAt),
  finishedAt: iso(d.finishedAt),
});

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/;

/**
 * A receiver URL: https, or http to this machine only (a receiver in development). The
 * payloads name users and their budgets, so they never cross a network in clear; a URL
 * with a user name or password is refused because URLs are shown in listings and logs.
 */
export function receiverUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ApiError("invalid_request", `${JSON.stringify(raw)} is not a URL`);
  }
  if (url.username || url.password) throw new ApiError("invalid_request", "a webhook URL may not carry a user name or password");
  if (url.protocol === "https:" || (url.protocol === "http:" && LOOPBACK.test(url.hostname))) return url.href;
  throw new ApiError("invalid_request", "a webhook URL must be https (http only to localhost or 127.0.0.1)");
}

export function eventTypes(raw: string[] | undefined): WebhookEventType[] | null {
  if (!raw || raw.length === 0) return null;
  for (const type of raw) {
    if (!(WEBHOOK_EVENT_TYPES as readonly string[]).includes(type)) {
      throw new ApiError("invalid_request", `unknown event type ${JSON.stringify(type)}; known: ${WEBHOOK_EVENT_TYPES.join(", ")}`);
    }
  }
  return [...new Set(raw)] as WebhookEventType[];
}

/** The operator's webhook operations, shared by the CLI and the admin API so the two cannot drift. */
export class WebhookEndpointOperations {
  constructor(private readonly store: Store) {}

  /** Registers an endpoint; the answer is the only time its signing secret is shown. */
  async add(appId: string, url: string, events: string[] | undefined, now: number): Promise<EndpointView & { secret: string }> {
    await this.app(appId);
    const endpoint = await this.store.webhooks.createEndpoint(appId, receiverUrl(url), eventTypes(events), now);
    return { ...endpointView(endpoint), secret: endpoint.secret };
  }

  async list(appId: string): Promise<EndpointView[]> {
    await this.app(appId);
    return (await this.store.webhooks.listEndpoints(appId)).map(endpointView);
  }

  async remove(appId: string, endpointId: string): Promise<void> {
    if (!(await this.store.webhooks.deleteEndpoint(appId, endpointId))) throw notFound(appId, endpointId);
  }

  async enable(appId: string, endpointId: string): Promise<EndpointView> {
    const endpoint = await this.store.webhooks.enableEndpoint(appId, endpointId);
    if (!endpoint) throw notFound(appId, endpointId);
    return endpointView(endpoint);
  }

  async disable(appId: string, endpointId: string, now: number): Promise<EndpointView> {
    const endpoint = (await this.store.webhooks.listEndpoints(appId)).find((e) => e.id === endpointId);
    if (!endpoint) throw notFound(appId, endpointId);
    await this.store.webhooks.disableEndpoint(endpointId, "operator", now);
    return endpointView((await this.store.webhooks.listEndpoints(appId)).find((e) => e.id === endpointId)!);
  }

  async deliveries(appId: string, limit: number, endpointId?: string) {
    await this.app(appId);
    return (await this.store.webhooks.listDeliveries(appId, limit, endpointId)).map(deliveryView);
  }

  private async app(appId: string): Promise<void> {
    if (!(await this.store.apps.find(appId))) throw new ApiError("not_found", `no app ${appId}`);
  }
}

const notFound = (appId: string, endpointId: string) => new ApiError("not_found", `no webhook endpoint ${endpointId} for app ${appId}`);
