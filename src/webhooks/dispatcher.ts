import { Webhook } from "standardwebhooks";
import type { Clock } from "../clock";
import type { Logger } from "../logger";
import type { DueDelivery, WebhookRepository } from "../store/webhooks";
import { PeriodicTask } from "../periodic-task";

export interface DispatcherOptions {
  /** How often the outbox is polled for due deliveries. */
  pollMs: number;
  /** Wait before each retry; after the last one the delivery fails for good. */
  retryScheduleMs: number[];
  /** Longest wait for a receiver's answer. */
  timeoutMs: number;
  /** Deliveries claimed (and sent concurrently) per round. */
  batchSize?: number;
}

export type SendWebhook = (url: string, init: RequestInit) => Promise<Response>;

/** Finished events are kept this long: longer than a month, so a period's threshold events still dedupe. */
const RETENTION_MS = 45 * 24 * 60 * 60 * 1000;
const PURGE_EVERY_MS = 60 * 60 * 1000;

/**
 * Sends the outbox's due deliveries, signed as Standard Webhooks specifies (`webhook-id`,
 * `webhook-timestamp`, `webhook-signature: v1,<HMAC-SHA256>`), and records each outcome
 * (ARCHITECTURE.md §6 "Webhooks"): 2xx delivered; 410 Gone disables the endpoint;
 * anything else (another status, a redirect, a timeout, no connection) is retried on the
 * schedule. A claimed delivery is leased for longer than one attempt can take, so if this
 * process dies mid-send the delivery becomes due again and another round sends it.
 */
export class WebhookDispatcher {
  readonly stats = { delivered: 0, failedAttempts: 0, gaveUp: 0, endpointsDisabled: 0 };
  private readonly rounds = new PeriodicTask(() =>
    this.deliverDue().catch((err) => this.logger.warn("webhook round failed; retrying at the next poll", { error: (err as Error).message })),
  );
  private lastPurge = 0;
  private readonly batchSize: number;
  private readonly leaseMs: number;

  constructor(
    private readonly outbox: WebhookRepository,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly options: DispatcherOptions,
    private readonly send: SendWebhook = (url, init) => fetch(url, init),
  ) {
    this.batchSize = options.batchSize ?? 32;
    this.leaseMs = options.timeoutMs * 3;
  }

  start(): void {
    this.rounds.start(this.options.pollMs);
  }

  /** One round now (tests, and the timer); a round already running is joined, not doubled. */
  runRound(): Promise<void> {
    return this.rounds.run();
  }

  /** Stops polling and waits for the round in flight (each send is bounded by its timeout). */
  stop(): Promise<void> {
    return this.rounds.stop();
  }

  private async deliverDue(): Promise<void> {
    // A full batch means more may be waiting: keep going, up to a bound per round.
    for (let i = 0; i < 10; i++) {
      const due = await this.outbox.claimDue(this.clock.now(), this.batchSize, this.leaseMs);
      await Promise.all(due.map((d) => this.deliver(d)));
      if (due.length < this.batchSize) break;
    }
    const now = this.clock.now();
    if (now - this.lastPurge >= PURGE_EVERY_MS) {
      this.lastPurge = now;
      await this.outbox.purgeFinished(now - RETENTION_MS, 1000);
    }
  }

  private async deliver(d: DueDelivery): Promise<void> {
    let status: number | null = null;
    let error: string;
    try {
      const response = await this.send(d.url, {
        method: "POST",
        body: d.payload,
        headers: signedHeaders(d),
        // A receiver that redirects is misconfigured: following could send the event elsewhere.
        redirect: "manual",
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      status = response.status;
      await response.body?.cancel().catch(() => {});
      if (status >= 200 && status < 300) {
        this.stats.delivered++;
        return this.outbox.markDelivered(d.eventId, d.endpointId, status, this.clock.now());
      }
      if (status === 410) {
        // Gone: the receiver says the endpoint no longer exists (Standard Webhooks' advice).
        this.stats.endpointsDisabled++;
        this.logger.warn("webhook endpoint answered 410 Gone; disabled", { endpointId: d.endpointId });
        return this.outbox.disableEndpoint(d.endpointId, "gone", this.clock.now());
      }
      error = `HTTP ${status}`;
    } catch (err) {
      error = (err as Error).name === "TimeoutError" ? `no answer within ${this.options.timeoutMs} ms` : (err as Error).message;
    }
    const attempts = d.attempts + 1;
    const wait = this.options.retryScheduleMs[attempts - 1];
    const nextAttemptAt = wait === undefined ? null : this.clock.now() + wait;
    this.stats.failedAttempts++;
    if (nextAttemptAt === null) {
      this.stats.gaveUp++;
      this.logger.warn("webhook delivery failed for good", { endpointId: d.endpointId, eventId: d.eventId, attempts, error });
    }
    await this.outbox.markAttemptFailed(d.eventId, d.endpointId, attempts, nextAttemptAt, status, error, this.clock.now());
  }
}

/**
 * The Standard Webhooks headers. The timestamp is the wall clock at sending, not the
 * event's time: receivers reject signatures older than a few minutes (replay protection),
 * and a retry a day later must still verify.
 */
export function signedHeaders(d: Pick<DueDelivery, "eventId" | "secret" | "payload">): Record<string, string> {
  const sentAt = new Date();
  return {
    "content-type": "application/json",
    "user-agent": "metered-model-proxy-webhooks/1",
    "webhook-id": d.eventId,
    "webhook-timestamp": String(Math.floor(sentAt.getTime() / 1000)),
    "webhook-signature": new Webhook(d.secret).sign(d.eventId, sentAt, d.payload),
  };
}
