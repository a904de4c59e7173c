import { Webhook } from "standardwebhooks";
import type { Clock } from "../clock";
import type { Logger } from "../logger";
import type { DeliveryFailure, DueDelivery, WebhookRepository } from "../store/webhooks";
import { PeriodicTask } from "../periodic-task";
import { attemptDelivery, type SendWebhook } from "./attempt";

export interface DispatcherOptions {
  /** How often the outbox is polled for due deliveries. */
  pollMs: number;
  /** Wait before each retry; after the last one the delivery fails for good. */
  retryScheduleMs: number[];
  /** Longest attempt (DNS lookup, connection, the receiver's answer); past it the attempt failed. */
  timeoutMs: number;
  /** Local development only: send to private, loopback and other non-public addresses too. */
  allowPrivateAddresses: boolean;
  /** Most sends in flight to one endpoint at once (in this process). */
  perEndpointInFlight?: number;
  /** Most sends in flight at once in this process, all endpoints together. */
  maxInFlight?: number;
}

export type { SendWebhook } from "./attempt";

/** Finished events are kept this long: longer than a month, so a period's threshold events still dedupe. */
const RETENTION_MS = 45 * 24 * 60 * 60 * 1000;
const PURGE_EVERY_MS = 60 * 60 * 1000;
/**
 * Four sends at once per endpoint: a receiver that hangs holds at most four sockets and four
 * of this process's slots until each times out, while a healthy one answering in 250 ms still
 * takes 16 events a second from each instance (far above the rate of connection changes and
 * thresholds), and one coming back from an outage is not hit by its whole backlog at once.
 */
const PER_ENDPOINT_IN_FLIGHT = 4;
/**
 * A ceiling on sockets and memory for the whole process. Sixteen endpoints would have to hang
 * at once to fill it, and even then every slot frees within WEBHOOK_TIMEOUT_MS.
 */
const MAX_IN_FLIGHT = 64;
/** Room for the outcome to be written after the attempt's deadline, before the lease lets another claim take it. */
const LEASE_MARGIN_MS = 30_000;
/** Claims in a row while slots keep freeing: a bound, so the rounds end (the next poll goes on). */
const MAX_CLAIMS_PER_ROUND = 10;

/**
 * Sends the outbox's due deliveries, signed as Standard Webhooks specifies (`webhook-id`,
 * `webhook-timestamp`, `webhook-signature: v1,<HMAC-SHA256>`), and records each outcome
 * (ARCHITECTURE.md §6 "Webhooks"): 2xx delivered; 410 Gone disables the endpoint;
 * anything else (another status, a redirect, a timeout, no connection, a refused address,
 * an endpoint secret this process cannot open) is retried on the schedule.
 *
 * Sends run concurrently and are not waited for by the round that claimed them, so a
 * receiver that hangs delays nothing but its own endpoint's deliveries. A round claims only
 * what it can start at once (per endpoint, and for the process): a claimed delivery is sent
 * immediately, so its lease (timeout plus a margin) outlives its attempt, and if this process
 * dies mid-send the delivery becomes due again when the lease ends. A send that finishes
 * starts a round at once, so a slot it frees is used without waiting for the next poll.
 */
export class WebhookDispatcher {
  readonly stats = { delivered: 0, failedAttempts: 0, gaveUp: 0, endpointsDisabled: 0, secretUnreadable: 0 };
  /** The poll: a claim round every pollMs; it joins a round already running. */
  private readonly rounds = new PeriodicTask(() => this.claimRounds());
  private lastPurge = 0;
  private readonly leaseMs: number;
  private readonly perEndpoint: number;
  private readonly maxInFlight: number;
  private readonly sending = new Set<Promise<void>>();
  private readonly sendingTo = new Map<string, number>();
  /** The claim rounds under way, if any: one at a time, so the in-flight counts a claim reads are exact. */
  private claiming: Promise<void> | null = null;
  /** A send finished (a slot freed) while rounds were under way: claim once more before stopping. */
  private claimAgain = false;
  private stopped = false;
  /** Endpoints whose unreadable secret this process has logged. */
  private readonly unreadableLogged = new Set<string>();

  constructor(
    private readonly outbox: WebhookRepository,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly options: DispatcherOptions,
    private readonly send: SendWebhook = (url, init) => fetch(url, init),
  ) {
    this.leaseMs = options.timeoutMs + LEASE_MARGIN_MS;
    this.perEndpoint = options.perEndpointInFlight ?? PER_ENDPOINT_IN_FLIGHT;
    this.maxInFlight = options.maxInFlight ?? MAX_IN_FLIGHT;
  }

  start(): void {
    this.stopped = false;
    this.rounds.start(this.options.pollMs);
  }

  /** A claim round now, then waits until nothing is in flight (tests; the poll does not wait for sends). */
  async runRound(): Promise<void> {
    await this.rounds.run();
    await this.idle();
  }

  /** Stops polling and waits for the rounds and the sends in flight (each send is bounded by its timeout). */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.rounds.stop();
    await this.idle();
  }

  /** Sends in flight right now, per endpoint id. */
  get inFlight(): ReadonlyMap<string, number> {
    return this.sendingTo;
  }

  /** Until no claim is under way and no send in flight, both seen at the same moment. */
  private async idle(): Promise<void> {
    for (;;) {
      if (this.claiming) await this.claiming;
      else if (this.sending.size > 0) await Promise.allSettled(this.sending);
      else return;
    }
  }

  /**
   * Claim rounds until one finds nothing new to start. Asked for while running, it joins and
   * makes the running one claim again, so a slot freed at any moment is used.
   */
  private claimRounds(): Promise<void> {
    if (this.claiming) {
      this.claimAgain = true;
      return this.claiming;
    }
    const rounds = async () => {
      try {
        await this.purge();
        // Nothing is awaited between the last check of claimAgain and `claiming = null`: no request is lost.
        for (let i = 0; i < MAX_CLAIMS_PER_ROUND && !this.stopped; i++) {
          this.claimAgain = false;
          await this.claimAndSend();
          if (!this.claimAgain) break;
        }
      } catch (err) {
        this.logger.warn("webhook round failed; retrying at the next poll", { error: (err as Error).message });
      } finally {
        this.claiming = null;
      }
    };
    this.claiming = rounds();
    return this.claiming;
  }

  /** Claims only what can start now: each claimed delivery is sent at once, so its lease (from the claim) covers its attempt. */
  private async claimAndSend(): Promise<void> {
    const room = this.maxInFlight - this.sending.size;
    if (room <= 0) return;
    const due = await this.outbox.claimDue(this.clock.now(), room, this.leaseMs, { perEndpoint: this.perEndpoint, sending: this.sendingTo });
    for (const d of due) this.startSending(d);
  }

  private async purge(): Promise<void> {
    const now = this.clock.now();
    if (now - this.lastPurge < PURGE_EVERY_MS) return;
    this.lastPurge = now;
    await this.outbox.purgeFinished(now - RETENTION_MS, 1000);
  }

  private startSending(d: DueDelivery): void {
    this.sendingTo.set(d.endpointId, (this.sendingTo.get(d.endpointId) ?? 0) + 1);
    const sent: Promise<void> = this.deliver(d)
      .catch((err) =>
        this.logger.warn("webhook outcome not recorded; sent again when its lease ends", { endpointId: d.endpointId, error: (err as Error).message }),
      )
      .finally(() => {
        this.sending.delete(sent);
        const left = this.sendingTo.get(d.endpointId)! - 1;
        if (left > 0) this.sendingTo.set(d.endpointId, left);
        else this.sendingTo.delete(d.endpointId);
        // The freed slot may let a delivery that waited for it go now, not at the next poll.
        if (!this.stopped) void this.claimRounds();
      });
    this.sending.add(sent);
  }

  private async deliver(d: DueDelivery): Promise<void> {
    if (d.secret === null) {
      // Nothing can be signed: this delivery fails (and is retried: an instance holding the
      // key may send it), without a word of the key or the sealed value. Logged once per
      // endpoint, not per delivery: a backlog would flood the log; /metrics counts each.
      this.stats.secretUnreadable++;
      if (!this.unreadableLogged.has(d.endpointId)) {
        this.unreadableLogged.add(d.endpointId);
        this.logger.warn("webhook endpoint's signing secret does not open with this process's secrets keys; its deliveries are not sent", {
          endpointId: d.endpointId,
        });
      }
      return this.recordFailure(d, null, "secret_unreadable");
    }
    const request = { url: d.url, headers: signedHeaders({ ...d, secret: d.secret }), body: d.payload };
    const result = await attemptDelivery(request, this.options, this.send);
    let error: DeliveryFailure;
    if (result.answered) {
      const status = result.status;
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
    } else {
      error = result.failure;
      if (result.failure === "address_refused") this.logger.warn("webhook receiver address refused", { endpointId: d.endpointId, cause: result.cause });
    }
    await this.recordFailure(d, result.answered ? result.status : null, error, result.answered ? undefined : result.cause);
  }

  /** A failed attempt: retried on the schedule, or failed for good after its last retry. */
  private async recordFailure(d: DueDelivery, status: number | null, error: DeliveryFailure, cause?: string): Promise<void> {
    const attempts = d.attempts + 1;
    const wait = this.options.retryScheduleMs[attempts - 1];
    const nextAttemptAt = wait === undefined ? null : this.clock.now() + wait;
    this.stats.failedAttempts++;
    if (nextAttemptAt === null) {
      this.stats.gaveUp++;
      this.logger.warn("webhook delivery failed for good", { endpointId: d.endpointId, eventId: d.eventId, attempts, error, cause });
    }
    await this.outbox.markAttemptFailed(d.eventId, d.endpointId, attempts, nextAttemptAt, status, error, this.clock.now());
  }
}

/**
 * The Standard Webhooks headers. The timestamp is the wall clock at sending, not the
 * event's time: receivers reject signatures older than a few minutes (replay protection),
 * and a retry a day later must still verify.
 */
export function signedHeaders(d: Pick<DueDelivery, "eventId" | "payload"> & { secret: string }): Record<string, string> {
  const sentAt = new Date();
  return {
    "content-type": "application/json",
    "user-agent": "metered-model-proxy-webhooks/1",
    "webhook-id": d.eventId,
    "webhook-timestamp": String(Math.floor(sentAt.getTime() / 1000)),
    "webhook-signature": new Webhook(d.secret).sign(d.eventId, sentAt, d.payload),
  };
}
