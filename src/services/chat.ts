import type { Config } from "../config";
import { SealedSecretError } from "../secrets/secret-box";
import { ApiError } from "../errors";
import type { Logger } from "../logger";
import type { ChargeLog, Meter, MeteringTicket } from "../metering/meter";
import type { InFlightCalls } from "../metering/in-flight-calls";
import { copyUpstreamResponseHeaders } from "../upstream/headers";
import { UpstreamTimeout, UpstreamUnreachable, type UpstreamClient } from "../upstream/client";
import { relayStream } from "../upstream/stream-relay";
import { upstreamFailure } from "../upstream/errors";
import { OperatorKeyState } from "../upstream/operator-key";
import type { BudgetTarget } from "../budget/target";
import { reserveChat, type Reserving } from "./chat-reservation";
import { budgetFigures } from "./budget-target";
import type { AnswerRecorder } from "./idempotency";
import type { DeferredRateLimit } from "../ratelimit/enforcement";
import { meteringHeaders, upstreamRequestBody } from "./upstream-body";
import { finishLate, meterJsonAnswer, type CallFinisher } from "./chat-answers";

/** The parts of a chat request the proxy relies on; everything else passes through. */
export interface ChatBody {
  model?: string;
  /** OpenRouter's fallbacks: tried in order when `model` (or the previous one) fails. */
  models?: string[];
  messages: unknown[];
  stream?: boolean;
  max_tokens?: number;
  max_completion_tokens?: number;
  usage?: Record<string, unknown>;
  stream_options?: Record<string, unknown>;
  [field: string]: unknown;
}

export interface ChatRequest {
  requestId: string;
  target: BudgetTarget;
  body: ChatBody;
  /** Size of the client's JSON body: an upper bound on the prompt's tokens. */
  bodyBytes: number;
  clientHeaders: Headers;
  /** Set when the call carries an Idempotency-Key: told the answer, or that there is none to keep. */
  recorder?: AnswerRecorder;
  /** The request's access-line fields (src/request/context.ts): the model and cost, and a stream's metering. */
  log?: CallLog;
  /** The call's rate-limit check, when it is left to the reservation (src/ratelimit/enforcement.ts). */
  rateLimit?: DeferredRateLimit;
}

/** What a call tells its access line: what it was charged, and for a stream when it is metered (the line waits for it). */
export interface CallLog extends ChargeLog {
  metered?: Promise<void>;
}

/**
 * The user's own upstream key for a call the user pays (payer `user`), opened from the
 * store for this call alone. A connection whose key
 * is gone since it was read (revoked, or relinked to the operator) is refused like a refused key.
 */
async function payingUserKey(target: BudgetTarget): Promise<string> {
  let key: string | null | undefined;
  try {
    key = await target.openUserKey?.();
  } catch (err) {
    // Sealed under a key this process does not hold (re-sealed by `keys rotate-kek` while it
    // ran on the old one): the operator's to fix by a restart, not the user's funding.
    if (err instanceof SealedSecretError && err.reason === "unknown_key") {
      throw new ApiError("unavailable", "this server cannot open the user's upstream key until it is restarted with its new secrets key; try again later");
    }
    throw err;
  }
  if (!key) throw new ApiError("funding_invalid", "no upstream key of the user's own is linked to this connection; the user must reconnect");
  return key;
}

/** Said to a client whose call timed out: it is not given up, so a retry must not run it again. */
export const MAY_STILL_BE_BILLED =
  "the upstream timed out: no answer in time. The call was not cancelled and may still be billed; it is charged when the upstream's answer or record comes. " +
  "Retry with the same Idempotency-Key to get its answer instead of calling the upstream again";

/**
 * One metered chat completion: reserve the worst case, record the call in the journal,
 * clamp max_tokens to what was granted, call the upstream, relay the answer, settle to the
 * actual cost. A call whose usage is not seen (the client left and the upstream never
 * finished, a timeout, a cut stream) keeps its reservation and goes to the reconciler
 * (src/metering/reconciler.ts); only a call that provably never reached the upstream is
 * released without charge (ARCHITECTURE.md §3 "The hard cap").
 */
export class ChatService implements CallFinisher {
  /** Streams (and late answers) being metered now, each with the abort of its upstream fetch. */
  private readonly inFlight = new Map<Promise<unknown>, AbortController>();
  /** What the upstream made of the operator's key on this process's calls (read by /readyz and /metrics). */
  readonly operatorKey = new OperatorKeyState();

  constructor(
    private readonly reserving: Reserving,
    private readonly upstream: UpstreamClient,
    readonly meter: Meter,
    readonly calls: InFlightCalls,
    readonly logger: Logger,
    readonly config: Pick<Config, "upstreamTimeoutMs" | "disconnectDrainMs">,
  ) {}

  async complete(request: ChatRequest): Promise<Response> {
    // Opened before anything is reserved, so a key gone since the connection was read costs
    // nothing. Awaited only when the user pays: a call on the operator's key takes no extra turn.
    const userKey = request.target.payer === "user" ? await payingUserKey(request.target) : undefined;
    const ticket = await reserveChat(this.reserving, request);
    try {
      // Journaled already when the ledger did it in the reservation's step (one round trip).
      if (!ticket.journaled) await this.calls.begin(ticket);
    } catch (err) {
      // Not recorded, so it must not go upstream: nothing was sent, nothing is charged, and
      // (as for a call refused before its reservation) no row is written.
      await this.meter.release(ticket);
      this.logger.error("the call journal refused a call; it was not sent upstream", { requestId: ticket.requestId, error: String(err) });
      throw new ApiError("unavailable", "the proxy could not record the call; nothing was sent or charged, try again");
    }
    if (!(await this.stillHeld(ticket))) {
      // The counters lost the reservation before the journal had the call (src/store/redis/budget-scripts.ts):
      // sent now, the call could be counted nowhere. Its entry ends with a row of nothing.
      await this.release(ticket, "budget_store_reset");
      throw new ApiError("unavailable", "the budget store lost its counters while this call was admitted; nothing was sent or charged, try again");
    }
    const stream = request.body.stream === true;
    const upstreamBody = JSON.stringify(upstreamRequestBody(request.body, ticket));

    let call: Awaited<ReturnType<UpstreamClient["chat"]>>;
    try {
      call = await this.upstream.chat(upstreamBody, request.clientHeaders, stream, userKey);
    } catch (err) {
      if (err instanceof UpstreamTimeout) {
        request.recorder?.detach();
        this.track(finishLate(this, ticket, err.pending, err.abort, request.recorder), err.abort);
        throw new ApiError("upstream", MAY_STILL_BE_BILLED, {}, { "x-should-retry": "false" });
      }
      if (err instanceof UpstreamUnreachable) {
        await this.release(ticket, "upstream_unreachable");
        throw new ApiError("upstream", err.message);
      }
      // Sent, then cut before any answer: the upstream may have started; its record decides.
      await this.handOver(ticket, "upstream_reset", null);
      throw new ApiError("upstream", "the upstream connection failed before an answer came; the call may have been billed", {}, { "x-should-retry": "false" });
    }
    const { response, abort } = call;
    const headers: Record<string, string> = {};
    copyUpstreamResponseHeaders(response.headers, headers);
    meteringHeaders(ticket, headers);
    const generationId = response.headers.get("x-generation-id");

    if (!response.ok) {
      // An HTTP error before any generation (OpenRouter answers errors after a generation
      // started in a 200 body or stream): nothing was billed.
      const text = await response.text().catch(() => "");
      await this.release(ticket, `upstream_${response.status}`);
      const { error, keyRefused, costRefused } = upstreamFailure(response.status, text, request.target.payer);
      // Only this request's cost, on the user's own key: a budget refusal, the key is fine.
      if (costRefused) throw await this.withBudgetFigures(error, request.target);
      // A refused key is its payer's problem: the user's own is marked (they reconnect); the
      // operator's marks no user and is reported to the operator instead (/readyz, /metrics).
      if (keyRefused && request.target.payer === "user") await request.target.markFundingInvalid();
      if (keyRefused && request.target.payer === "app") this.operatorKey.refused(response.status);
      throw error;
    }
    if (request.target.payer === "app") this.operatorKey.accepted();

    const isStream = stream && (response.headers.get("content-type") ?? "").includes("text/event-stream");
    if (!isStream || !response.body) return meterJsonAnswer(this, ticket, response, abort, headers, request.recorder);
    // The id is in the journal before a byte of the answer leaves (from the header, or from
    // the first chunk that carries it: the relay waits for it there).
    if (generationId !== null) await this.calls.identify(ticket.requestId, generationId).catch((err) => this.journalFailed(ticket, err));
    return this.streamAnswer(ticket, response.body, abort, headers, request.recorder, request.log, generationId);
  }

  /**
   * Relays a stream and meters it when it ends. A method of its own, not part of
   * `complete`: the stream's callbacks would otherwise keep that async function's state
   * alive, and with it the client's whole request (the prompt), for as long as the stream
   * runs (ARCHITECTURE.md §7 "Stream answered apart").
   */
  private streamAnswer(
    ticket: MeteringTicket,
    upstreamBody: ReadableStream<Uint8Array>,
    abort: AbortController,
    headers: Record<string, string>,
    recorder: AnswerRecorder | undefined,
    log: CallLog | undefined,
    headerGenerationId: string | null,
  ): Response {
    headers["content-type"] = "text/event-stream";
    headers["cache-control"] = "no-cache";
    let settled!: () => void;
    const metered = new Promise<void>((resolve) => (settled = resolve));
    this.track(metered, abort);
    // The access line of a stream is written once it is metered, with its cost.
    if (log) log.metered = metered;
    const body = relayStream(
      upstreamBody,
      abort,
      {
        stallTimeoutMs: this.config.upstreamTimeoutMs,
        drainTimeoutMs: this.config.disconnectDrainMs,
        onChunk: recorder && ((chunk) => recorder.chunk(chunk)),
        identify: headerGenerationId === null ? (id) => this.calls.identify(ticket.requestId, id).catch((err) => this.journalFailed(ticket, err)) : undefined,
      },
      (status, scanner) => {
        const generationId = headerGenerationId ?? scanner.generationId;
        // A whole answer (also one drained after the client left) is kept for a retry;
        // one the upstream broke off is not, and a retry runs again.
        const whole = status === "ok" || (status === "client_disconnected" && scanner.usage !== null && !scanner.error);
        if (whole) void recorder?.finished({ contentType: "text/event-stream", generationId });
        else recorder?.abandoned();
        const done =
          scanner.usage !== null
            ? this.meter.finish(ticket, { status, usage: scanner.usage, generationId, completionEvents: scanner.events, producedNothing: false })
            : // No usage seen: what the upstream billed comes from its record of the generation.
              this.handOver(ticket, status, generationId);
        void done.catch((err) => this.logger.error("settling a stream failed", { requestId: ticket.requestId, error: String(err) })).finally(settled);
      },
    );
    return new Response(body, { status: 200, headers });
  }

  /** Whether the call's holds are still counted, now that it is journaled (BudgetLedger.confirmHeld); a store that cannot say is a no. */
  private async stillHeld(ticket: MeteringTicket): Promise<boolean> {
    const { budget } = this.reserving;
    if (!budget.confirmHeld) return true;
    const ids = ticket.ceilingReservationId ? [ticket.requestId, ticket.ceilingReservationId] : [ticket.requestId];
    try {
      return (await Promise.all(ids.map((id) => budget.confirmHeld!(id)))).every(Boolean);
    } catch {
      return false;
    }
  }

  /** A budget refusal with what a program needs to act on it: the budget's figures (its reservation was given back). */
  private async withBudgetFigures(error: ApiError, target: BudgetTarget): Promise<ApiError> {
    return new ApiError(error.code, error.message, { ...budgetFigures(target, await this.reserving.budget.snapshot(target.account)) });
  }

  /** The call's usage was not seen: its reservation stays held until the reconciler settles it. */
  async handOver(ticket: MeteringTicket, reason: string, generationId: string | null): Promise<void> {
    if (ticket.log) ticket.log.model = ticket.model;
    await this.calls.handOver(ticket.requestId, reason, generationId);
  }

  /** A call that never reached the upstream (or whose upstream refused it before any generation) costs nothing; the row says why. */
  async release(ticket: MeteringTicket, status: string): Promise<void> {
    await this.meter.finish(ticket, { status, usage: null, generationId: null, completionEvents: 0, producedNothing: true });
  }

  /** Resolves when every stream being metered now, and every settle under way, is done, or after `timeoutMs`. */
  async idle(timeoutMs: number): Promise<void> {
    const timeout = new Promise<void>((resolve) => setTimeout(resolve, timeoutMs).unref?.());
    await Promise.race([Promise.allSettled([...this.inFlight.keys(), this.meter.settled()]), timeout]);
  }

  /**
   * Stops reading every upstream still open (shutdown past its grace). Each stream then
   * ends at once; those whose usage had not come go to the reconciler.
   */
  abortStreams(reason: string): void {
    for (const abort of this.inFlight.values()) abort.abort(new Error(reason));
  }

  get activeStreams(): number {
    return this.inFlight.size;
  }

  private track(promise: Promise<unknown>, abort: AbortController): void {
    this.inFlight.set(promise, abort);
    void promise.finally(() => this.inFlight.delete(promise));
  }

  private journalFailed(ticket: MeteringTicket, err: unknown): void {
    this.logger.warn("recording a call's generation id failed; if its usage is not seen it is charged its reservation", {
      requestId: ticket.requestId,
      error: String(err),
    });
  }
}
