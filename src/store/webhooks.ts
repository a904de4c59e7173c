import { randomBytes } from "node:crypto";
import { LOWER_ALNUM, randomString } from "../random";

/** Every event an app can subscribe to (ARCHITECTURE.md §6 "Webhooks"). */
export const WEBHOOK_EVENT_TYPES = [
  "connection.approved",
  "connection.updated",
  "connection.revoked",
  "budget.threshold",
  "funding.invalid",
  "grant.exhausted",
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export interface WebhookEndpoint {
  id: string;
  appId: string;
  url: string;
  /** The event types sent to it; null means all of them, including types added later. */
  eventTypes: WebhookEventType[] | null;
  createdAt: number;
  disabledAt: number | null;
  /** Why it was disabled: `gone` (the receiver answered 410) or `operator`. */
  disabledReason: string | null;
}

/**
 * An endpoint as created: with its signing secret, `whsec_` + base64 key (the Standard
 * Webhooks format), shown this once. It is stored sealed (src/secrets/secret-box.ts, bound
 * to the endpoint's id) and opened only for signing (DueDelivery.secret).
 */
export type CreatedWebhookEndpoint = WebhookEndpoint & { secret: string };

/** An endpoint's signing secret as the store holds it: sealed, or in clear when an older version wrote it. */
export interface StoredEndpointSecret {
  endpointId: string;
  appId: string;
  stored: string;
}

/** An event to record: one message, fanned out to the app's subscribed endpoints. */
export interface WebhookEventDraft {
  appId: string;
  type: WebhookEventType;
  data: Record<string, unknown>;
  /** At most one event is ever recorded per key (e.g. one 80% threshold per account and period). */
  dedupKey?: string;
}

export type DeliveryState = "pending" | "delivered" | "failed";

/** Why an endpoint was disabled: the receiver answered 410 Gone, or the operator did it. */
export type DisableReason = "gone" | "operator";

/**
 * Why an attempt failed, as stored and listed: a coarse class, never the receiver's or the
 * operating system's own words, so that a listing cannot serve to probe the network the
 * service runs in (which ports refuse, which hosts exist). `timeout`: no answer within
 * WEBHOOK_TIMEOUT_MS; `unreachable`: DNS failure, refused, reset, TLS failure;
 * `address_refused`: the host resolved to a private, loopback or other non-public address.
 */
export type AttemptFailure = "timeout" | "unreachable" | "address_refused";
/**
 * The error field of a delivery: an attempt's failure, a receiver's status, its endpoint
 * disabled, or `secret_unreadable`: the endpoint's signing secret does not open with the
 * keys of the process that claimed it (sealed under a key it does not hold), so nothing
 * was sent; retried on the schedule like any failure, since another instance (or this one
 * restarted with the key) may hold the key.
 */
export type DeliveryFailure = AttemptFailure | "secret_unreadable" | `HTTP ${number}` | `endpoint disabled (${DisableReason})`;

/** One message due to one endpoint, as the dispatcher sends it. */
export interface DueDelivery {
  eventId: string;
  endpointId: string;
  url: string;
  /**
   * The endpoint's signing secret, opened; null when it does not open with this process's
   * keys. One endpoint's unreadable secret fails its own deliveries, never the claim.
   */
  secret: string | null;
  /** The exact bytes that are signed and sent. */
  payload: string;
  /** Attempts made before this one. */
  attempts: number;
}

/** A claim's per-endpoint bound: the most in flight to one endpoint, and what this claimer has in flight to each. */
export interface ClaimBound {
  perEndpoint: number;
  sending: ReadonlyMap<string, number>;
}

export interface DeliveryRecord {
  eventId: string;
  endpointId: string;
  type: WebhookEventType;
  state: DeliveryState;
  attempts: number;
  nextAttemptAt: number | null;
  lastStatus: number | null;
  lastError: DeliveryFailure | null;
  createdAt: number;
  finishedAt: number | null;
}

export const newEndpointId = () => `whe${randomString(16, LOWER_ALNUM)}`;
export const newWebhookSecret = () => `whsec_${randomBytes(32).toString("base64")}`;
/** Message ids are the Standard Webhooks `webhook-id`: the same on every retry, so receivers can drop repeats. */
export const newEventId = () => `msg_${randomString(24)}`;

/** The payload every event carries: `{type, timestamp, data}`, the Standard Webhooks shape. */
export function eventPayload(draft: WebhookEventDraft, now: number): string {
  return JSON.stringify({ type: draft.type, timestamp: new Date(now).toISOString(), data: draft.data });
}

/**
 * The webhook outbox. An event is a row before anything is sent, written in the same
 * transaction as the change it reports where there is one, so a crash can delay a
 * delivery but never lose it. Deliveries are claimed with a lease: a process that dies
 * mid-send leaves the delivery due again once the lease runs out.
 */
export interface WebhookRepository {
  /** Creates it with a new signing secret, stored sealed; the answer is the only one that carries the secret. */
  createEndpoint(appId: string, url: string, eventTypes: WebhookEventType[] | null, now: number): Promise<CreatedWebhookEndpoint>;
  listEndpoints(appId: string): Promise<WebhookEndpoint[]>;
  /** Deletes the endpoint and its deliveries; false when the app has no such endpoint. */
  deleteEndpoint(appId: string, endpointId: string): Promise<boolean>;
  /** Disables it and fails its pending deliveries (nothing more is sent to it). */
  disableEndpoint(endpointId: string, reason: DisableReason, now: number): Promise<void>;
  /** Enables it again; deliveries failed while it was disabled stay failed. */
  enableEndpoint(appId: string, endpointId: string): Promise<WebhookEndpoint | null>;
  /**
   * Records an event for every enabled endpoint of the app subscribed to its type. Returns
   * the event id, or null when no endpoint wants it or its dedup key was already recorded.
   */
  record(draft: WebhookEventDraft, now: number): Promise<string | null>;
  /**
   * Claims up to `limit` deliveries due at `now`: each is leased until `now + leaseMs`
   * (its next attempt time moves there) so no other claim takes it meanwhile. With a
   * `bound`, no endpoint gets more than `perEndpoint` minus what `sending` already holds
   * for it, so an endpoint at its bound is skipped and its deliveries stay due (unleased).
   * Earliest first per endpoint, endpoints taking turns: one endpoint's backlog cannot fill
   * the claim while another's first delivery waits.
   */
  claimDue(now: number, limit: number, leaseMs: number, bound?: ClaimBound): Promise<DueDelivery[]>;
  markDelivered(eventId: string, endpointId: string, status: number, now: number): Promise<void>;
  /** A failed attempt: retried at `nextAttemptAt`, or failed for good when that is null. */
  markAttemptFailed(
    eventId: string,
    endpointId: string,
    attempts: number,
    nextAttemptAt: number | null,
    status: number | null,
    error: DeliveryFailure,
    now: number,
  ): Promise<void>;
  /** An app's deliveries, newest first. */
  listDeliveries(appId: string, limit: number, endpointId?: string): Promise<DeliveryRecord[]>;
  /** Deletes events whose deliveries all finished before `before`; returns how many. */
  purgeFinished(before: number, limit: number): Promise<number>;
  /** Every endpoint's secret as stored (to seal the ones an older version kept in clear, or to rotate keys). */
  storedSecrets(): Promise<StoredEndpointSecret[]>;
  /** Replaces an endpoint's stored secret only while it is still `expected` (compare and set); true when it did. */
  replaceStoredSecret(endpointId: string, expected: string, replacement: string): Promise<boolean>;
}
