import { SealedSecretError, SecretBox, sealedContext } from "../secrets/secret-box";
import { sealFenced } from "./key-fence";
import type { DeliveryFailure, DeliveryRecord, DueDelivery, StoredEndpointSecret, WebhookEndpoint, WebhookEventType } from "./webhooks";

/** Row mappers shared by both engines: the webhook tables have the same columns on each. */
export interface EndpointRow {
  id: string;
  app_id: string;
  url: string;
  secret: string;
  event_types: string | null;
  created_at: number;
  disabled_at: number | null;
  disabled_reason: string | null;
}

export const toEndpoint = (r: EndpointRow): WebhookEndpoint => ({
  id: r.id,
  appId: r.app_id,
  url: r.url,
  eventTypes: r.event_types === null ? null : (JSON.parse(r.event_types) as WebhookEventType[]),
  createdAt: Number(r.created_at),
  disabledAt: r.disabled_at === null ? null : Number(r.disabled_at),
  disabledReason: r.disabled_reason,
});

export const toDelivery = (r: Record<string, unknown>): DeliveryRecord => ({
  eventId: String(r.event_id),
  endpointId: String(r.endpoint_id),
  type: r.type as WebhookEventType,
  state: r.state as DeliveryRecord["state"],
  attempts: Number(r.attempts),
  nextAttemptAt: r.state === "pending" && r.next_attempt_at !== null ? Number(r.next_attempt_at) : null,
  lastStatus: r.last_status === null ? null : Number(r.last_status),
  lastError: failureClass((r.last_error as string | null) ?? null),
  createdAt: Number(r.created_at),
  finishedAt: r.finished_at === null ? null : Number(r.finished_at),
});

const FAILURE_CLASS = /^(timeout|unreachable|address_refused|secret_unreadable|HTTP \d{3}|endpoint disabled \((gone|operator)\))$/;

/**
 * A stored error as its class. Rows written before errors were stored as classes hold the
 * raw error text; it is not shown (see DeliveryFailure), only the class it most likely was.
 */
export function failureClass(stored: string | null): DeliveryFailure | null {
  if (stored === null || FAILURE_CLASS.test(stored)) return stored as DeliveryFailure | null;
  return stored.startsWith("no answer within") ? "timeout" : "unreachable";
}

/** The endpoints of an app that want this type of event. */
export const subscribed = (endpoints: WebhookEndpoint[], type: WebhookEventType) =>
  endpoints.filter((e) => e.disabledAt === null && (e.eventTypes === null || e.eventTypes.includes(type)));

/** The secret a new endpoint is stored with: sealed, bound to the endpoint's id, behind the key fence (`storedCheck`: src/store/key-fence.ts). */
export const sealEndpointSecret = (box: SecretBox, storedCheck: string | null, endpointId: string, secret: string) =>
  sealFenced(box, storedCheck, secret, sealedContext.webhookEndpoint(endpointId));

export const toStoredSecret = (r: Record<string, unknown>): StoredEndpointSecret => ({
  endpointId: String(r.id),
  appId: String(r.app_id),
  stored: String(r.secret),
});

/**
 * A claimed delivery, from the claim's row (delivery, event payload, endpoint url and
 * secret), with the secret opened. A value an older version stored in clear (not yet
 * sealed at open) is used as it is. A secret that does not open comes as null: the claim
 * goes on with the other rows, and the dispatcher fails this one alone.
 */
export const toDueDelivery = (d: Record<string, unknown>, box: SecretBox): DueDelivery => ({
  eventId: String(d.event_id),
  endpointId: String(d.endpoint_id),
  url: String(d.url),
  secret: openEndpointSecret(box, String(d.endpoint_id), String(d.secret)),
  payload: String(d.payload),
  attempts: Number(d.attempts),
});

function openEndpointSecret(box: SecretBox, endpointId: string, stored: string): string | null {
  if (!SecretBox.isSealed(stored)) return stored;
  try {
    return box.open(stored, sealedContext.webhookEndpoint(endpointId));
  } catch (err) {
    if (err instanceof SealedSecretError) return null;
    throw err;
  }
}

/** Whether an endpoint's stored secret opens with `box`: what the listings show as its secretState. */
export const endpointSecretOpens = (box: SecretBox, endpointId: string, stored: string): boolean => openEndpointSecret(box, endpointId, stored) !== null;
