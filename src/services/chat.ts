import type { Deps } from "../deps";
import { ApiError } from "../errors";
import type { Meter, MeteringTicket } from "../metering/meter";
import type { PricingCatalogue } from "../metering/pricing";
import { readError, readUsage } from "../metering/usage";
import { copyUpstreamResponseHeaders } from "../upstream/headers";
import { UpstreamUnreachable, type UpstreamClient } from "../upstream/client";
import { relayStream } from "../upstream/stream-relay";
import { upstreamFailure } from "../upstream/errors";
import type { BudgetTarget } from "./budget-target";
import type { AccessEntry } from "../http/access-log";
import { reserveChat } from "./chat-reservation";
import type { AnswerRecorder } from "./idempotency";
import type { DeferredRateLimit } from "../ratelimit/macro";
import { meteringHeaders, upstreamRequestBody } from "./upstream-body";

const UTF8 = new TextDecoder();

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
  /** The request's access-log entry (see src/http/access-log.ts). */
  access?: AccessEntry;
  /** The call's rate-limit check, when it is left to the reservation (src/ratelimit/macro.ts). */
  rateLimit?: DeferredRateLimit;
}

/**
 * One metered chat completion: reserve the worst case, clamp max_tokens to what was
 * granted, call the upstream, relay the answer, settle to the actual cost.
 */
export class ChatService {
  /** Streams being metered now, each with the abort of its upstream fetch. */
  private readonly inFlight = new Map<Promise<unknown>, AbortController>();

  constructor(
    private readonly deps: Deps,
    private readonly upstream: UpstreamClient,
    private readonly catalogue: PricingCatalogue,
    private readonly meter: Meter,
  ) {}

  async complete(request: ChatRequest): Promise<Response> {
    const ticket = await reserveChat(this.deps, this.catalogue, request);
    const stream = request.body.stream === true;
    const upstreamBody = JSON.stringify(upstreamRequestBody(request.body, ticket));

    let call: Awaited<ReturnType<UpstreamClient["chat"]>>;
    try {
      call = await this.upstream.chat(upstreamBody, request.clientHeaders, stream);
    } catch (err) {
      await this.refund(ticket, "upstream_unreachable");
      throw new ApiError("upstream", err instanceof UpstreamUnreachable ? err.message : "could not reach the upstream");
    }
    const { response, abort } = call;
    const headers: Record<string, string> = {};
    copyUpstreamResponseHeaders(response.headers, headers);
    meteringHeaders(ticket, headers);

    if (!response.ok) {
      const text = await response.text().catch(() => "");
      await this.refund(ticket, `upstream_${response.status}`);
      const failure = upstreamFailure(response.status, text);
      if (failure.code === "funding_invalid") await request.target.markFundingInvalid();
      throw failure;
    }

    const isStream = stream && (response.headers.get("content-type") ?? "").includes("text/event-stream");
    if (!isStream || !response.body) return this.completeJson(ticket, response, abort, headers, request.recorder);
    return this.streamAnswer(ticket, response.body, abort, headers, request.recorder, request.access);
  }

  /**
   * Relays a stream and meters it when it ends. A method of its own, not part of
   * `complete`: the stream's callbacks would otherwise keep that async function's state
   * alive, and with it the client's whole request (the prompt), for as long as the stream
   * runs (BENCHMARKS.md, issue 14, eighth session).
   */
  private streamAnswer(
    ticket: MeteringTicket,
    upstreamBody: ReadableStream<Uint8Array>,
    abort: AbortController,
    headers: Record<string, string>,
    recorder: AnswerRecorder | undefined,
    access: AccessEntry | undefined,
  ): Response {
    headers["content-type"] = "text/event-stream";
    headers["cache-control"] = "no-cache";
    let settled!: () => void;
    const metered = new Promise<void>((resolve) => (settled = resolve));
    this.track(metered, abort);
    // The access line of a stream is written once it is metered, with its cost.
    if (access) access.metered = metered;
    const body = relayStream(
      upstreamBody,
      abort,
      {
        stallTimeoutMs: this.deps.config.upstreamTimeoutMs,
        drainTimeoutMs: this.deps.config.disconnectDrainMs,
        onChunk: recorder && ((chunk) => recorder.chunk(chunk)),
      },
      (status, scanner) => {
        const producedNothing = scanner.events === 0 && scanner.usage === null;
        // A whole answer (also one drained after the client left) is kept for a retry;
        // one the upstream broke off is not, and a retry runs again.
        const whole = status === "ok" || (status === "client_disconnected" && scanner.usage !== null && !scanner.error);
        if (whole) void recorder?.finished({ contentType: "text/event-stream", generationId: scanner.generationId });
        else recorder?.abandoned();
        void this.meter
          .finish(ticket, { status, usage: scanner.usage, generationId: scanner.generationId, completionEvents: scanner.events, producedNothing })
          .catch((err) => this.deps.logger.error("settling a stream failed", { requestId: ticket.requestId, error: String(err) }))
          .finally(settled);
      },
    );
    return new Response(body, { status: 200, headers });
  }

  /** Resolves when every stream being metered now, and every settle under way, is done, or after `timeoutMs`. */
  async idle(timeoutMs: number): Promise<void> {
    const timeout = new Promise<void>((resolve) => setTimeout(resolve, timeoutMs).unref?.());
    await Promise.race([Promise.allSettled([...this.inFlight.keys(), this.meter.settled()]), timeout]);
  }

  /**
   * Stops reading every upstream still open (shutdown past its grace). Each stream then
   * ends at once and is metered from what it relayed: an estimate unless its usage came.
   */
  abortStreams(reason: string): void {
    for (const abort of this.inFlight.values()) abort.abort(new Error(reason));
  }

  get activeStreams(): number {
    return this.inFlight.size;
  }

  private async completeJson(
    ticket: MeteringTicket,
    response: Response,
    abort: AbortController,
    headers: Record<string, string>,
    recorder: AnswerRecorder | undefined,
  ): Promise<Response> {
    const bodyTimer = setTimeout(() => abort.abort(new UpstreamUnreachable("upstream body timed out")), this.deps.config.upstreamTimeoutMs);
    let bytes: ArrayBuffer;
    try {
      bytes = await response.arrayBuffer();
    } catch {
      await this.refund(ticket, "upstream_reset");
      throw new ApiError("upstream", "the upstream connection failed before the response was complete");
    } finally {
      clearTimeout(bodyTimer);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(UTF8.decode(bytes));
    } catch {
      // Nothing billable can be read from it, and clients retry a 502: charging an estimate
      // here would charge the user once per retry. Refund, and tell the operator.
      this.deps.logger.warn("upstream answered 200 with a body that is not JSON", { requestId: ticket.requestId, model: ticket.model });
      await this.refund(ticket, "upstream_malformed");
      throw new ApiError("upstream", "the upstream answered with a body that is not JSON");
    }
    // OpenRouter can answer HTTP 200 with an error body: that is an upstream error, not a 200.
    const error = readError(parsed);
    if (error) {
      await this.refund(ticket, "upstream_error");
      throw new ApiError("upstream", `upstream error (HTTP 200${error.code !== null ? `, code ${error.code}` : ""}): ${error.message}`);
    }
    const id = (parsed as { id?: unknown }).id;
    // The answer leaves once its ledger row is on disk (ARCHITECTURE.md §3 "The hard
    // cap"): a client that has its answer has been charged for it, even if the process is
    // killed the moment after. Rows of one turn commit together, so this costs a turn and
    // one transaction, not one per call.
    await this.meter
      .finish(
        ticket,
        { status: "ok", usage: readUsage(parsed), generationId: typeof id === "string" ? id : null, completionEvents: 1, producedNothing: false },
        true,
      )
      .catch((err) => this.deps.logger.error("settling a JSON answer failed", { requestId: ticket.requestId, error: String(err) }));
    headers["content-type"] = "application/json";
    recorder?.chunk(new Uint8Array(bytes));
    await recorder?.finished({ contentType: "application/json", generationId: typeof id === "string" ? id : null });
    return new Response(bytes, { status: 200, headers });
  }

  /** A request that failed before producing tokens costs nothing; the row says why. */
  private refund(ticket: MeteringTicket, status: string) {
    return this.meter.finish(ticket, { status, usage: null, generationId: null, completionEvents: 0, producedNothing: true });
  }

  private track(promise: Promise<unknown>, abort: AbortController): void {
    this.inFlight.set(promise, abort);
    void promise.finally(() => this.inFlight.delete(promise));
  }
}
