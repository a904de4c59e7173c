import type { Config } from "../config";
import { ApiError } from "../errors";
import type { Logger } from "../logger";
import type { Meter, MeteringTicket } from "../metering/meter";
import { SseUsageScanner } from "../upstream/sse-usage-scanner";
import { readError, readUsage } from "../pricing/usage";
import { UPSTREAM_USAGE_INVALID } from "../budget/usage-row";
import type { AnswerRecorder } from "./idempotency";

const UTF8 = new TextDecoder();
/** Not retried by the openai SDK: the call may have been billed, a retry would be billed again. */
const NO_RETRY = { "x-should-retry": "false" };

/** What the answer paths need of the chat service (src/services/chat.ts). */
export interface CallFinisher {
  readonly logger: Logger;
  readonly config: Pick<Config, "upstreamTimeoutMs" | "disconnectDrainMs">;
  readonly meter: Meter;
  /** The usage was not seen: the reservation stays held for the reconciler. */
  handOver(ticket: MeteringTicket, reason: string, generationId: string | null): Promise<void>;
  /** The call never reached the upstream, or was refused before any generation: nothing is charged. */
  release(ticket: MeteringTicket, status: string): Promise<void>;
}

/**
 * A JSON answer: read (its body bounded by UPSTREAM_TIMEOUT_MS), metered, and handed to the
 * client once its row is on disk. A body that is late is not given up: the client is told so
 * (502, not to be retried) and the body is read on in the background for its usage.
 */
export async function meterJsonAnswer(
  f: CallFinisher,
  ticket: MeteringTicket,
  response: Response,
  abort: AbortController,
  headers: Record<string, string>,
  recorder: AnswerRecorder | undefined,
): Promise<Response> {
  const headerId = response.headers.get("x-generation-id");
  const reading = response.arrayBuffer();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((resolve) => (timer = setTimeout(resolve, f.config.upstreamTimeoutMs, "late")));
  let bytes: ArrayBuffer | "late";
  try {
    bytes = await Promise.race([reading, late]);
  } catch {
    await f.handOver(ticket, "upstream_reset", headerId);
    throw new ApiError("upstream", "the upstream connection failed before its answer was complete; the call may have been billed", {}, NO_RETRY);
  } finally {
    clearTimeout(timer);
  }
  if (bytes === "late") {
    recorder?.detach();
    void readLateJson(f, ticket, reading, abort, headerId, recorder);
    throw new ApiError("upstream", "the upstream's answer was not complete in time; the call was not cancelled and may still be billed", {}, NO_RETRY);
  }
  const metered = await meterJsonBytes(f, ticket, bytes, headerId, recorder);
  headers["content-type"] = "application/json";
  recorder?.chunk(new Uint8Array(bytes));
  await recorder?.finished({ contentType: "application/json", generationId: metered.generationId });
  return new Response(bytes, { status: 200, headers });
}

/**
 * Meters a whole JSON body; throws the client's error when it is not an answer, or not one
 * the proxy can vouch for. Its row is on disk when this resolves (ARCHITECTURE.md §3 "The hard cap").
 */
async function meterJsonBytes(
  f: CallFinisher,
  ticket: MeteringTicket,
  bytes: ArrayBuffer,
  headerId: string | null,
  recorder: AnswerRecorder | undefined,
): Promise<{ generationId: string | null }> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(UTF8.decode(bytes));
  } catch {
    f.logger.warn("upstream answered 200 with a body that is not JSON", { requestId: ticket.requestId, model: ticket.model });
    // With a generation id the upstream generated and may have billed: its record says
    // what. Without one (every generation has one, in X-Generation-Id), the body is not an
    // answer at all, a gateway's page say, and nothing was generated: clients retry a 502,
    // and a charge here would be a charge per retry.
    if (headerId === null) {
      await f.release(ticket, "upstream_malformed");
      throw new ApiError("upstream", "the upstream answered with a body that is not JSON");
    }
    await f.handOver(ticket, "upstream_malformed", headerId);
    throw new ApiError("upstream", "the upstream answered with a body that is not JSON; the call may have been billed", {}, NO_RETRY);
  }
  const bodyId = (parsed as { id?: unknown } | null)?.id;
  const generationId = headerId ?? (typeof bodyId === "string" ? bodyId : null);
  // OpenRouter can answer HTTP 200 with an error body: that is an upstream error, not a 200.
  const error = readError(parsed);
  if (error) {
    // With a generation the upstream may have billed part of it (its record says); without
    // one, nothing was generated.
    if (generationId !== null) await f.handOver(ticket, "upstream_error", generationId);
    else await f.release(ticket, "upstream_error");
    throw new ApiError("upstream", `upstream error (HTTP 200${error.code !== null ? `, code ${error.code}` : ""}): ${error.message}`);
  }
  const usage = readUsage(parsed);
  // An answer without usage: what it cost is in the upstream's record of it.
  if (usage === null) await f.handOver(ticket, "ok", generationId);
  else {
    const charged = await f.meter.finish(ticket, { status: "ok", usage, generationId, completionEvents: 1, producedNothing: false }, true);
    // Usage that cannot be true (src/pricing/usage-check.ts): the answer is not one the proxy
    // can vouch for, so it is an upstream error; charged its reservation, and kept as the
    // answer under an Idempotency-Key, so a retry is not charged again.
    if (charged.status === UPSTREAM_USAGE_INVALID) {
      const error = new ApiError("upstream", "the upstream's answer reported usage that cannot be true; the call was charged its reservation", {}, NO_RETRY);
      recorder?.failed(error);
      throw error;
    }
  }
  return { generationId };
}

/** The rest of a JSON body whose client was already answered: metered when it comes, kept for a retry under the same key. */
async function readLateJson(
  f: CallFinisher,
  ticket: MeteringTicket,
  reading: Promise<ArrayBuffer>,
  abort: AbortController,
  headerId: string | null,
  recorder: AnswerRecorder | undefined,
): Promise<void> {
  const giveUp = setTimeout(() => abort.abort(new Error("the upstream's late answer took too long")), f.config.disconnectDrainMs);
  try {
    const bytes = await reading;
    const { generationId } = await meterJsonBytes(f, ticket, bytes, headerId, recorder);
    recorder?.chunk(new Uint8Array(bytes));
    await recorder?.finished({ contentType: "application/json", generationId });
  } catch (err) {
    if (!(err instanceof ApiError)) await f.handOver(ticket, "upstream_timeout", headerId).catch(logFailure(f, ticket));
    recorder?.failed(err instanceof ApiError ? err : lateFailure());
  } finally {
    clearTimeout(giveUp);
  }
}

/**
 * A call whose answer's headers did not come in time: the client was answered 502, and the
 * upstream is waited for here, up to DISCONNECT_DRAIN_MS, for the usage of what it bills in
 * full anyway (OpenRouter's streaming page: a non-streaming request, or a provider that
 * cannot cancel, runs to its end). Failing that, the reconciler settles the call.
 */
export async function finishLate(
  f: CallFinisher,
  ticket: MeteringTicket,
  pending: Promise<Response>,
  abort: AbortController,
  recorder: AnswerRecorder | undefined,
): Promise<void> {
  const giveUp = setTimeout(() => abort.abort(new Error("the upstream's late answer took too long")), f.config.disconnectDrainMs);
  let generationId: string | null = null;
  try {
    const response = await pending;
    generationId = response.headers.get("x-generation-id");
    if (!response.ok) {
      await response.body?.cancel().catch(() => {});
      await f.release(ticket, `upstream_${response.status}`);
      recorder?.failed(lateFailure());
      return;
    }
    if (!(response.headers.get("content-type") ?? "").includes("text/event-stream") || !response.body) {
      clearTimeout(giveUp);
      return await readLateJson(f, ticket, response.arrayBuffer(), abort, generationId, recorder);
    }
    const scanner = new SseUsageScanner();
    for await (const chunk of response.body) {
      scanner.feed(chunk);
      recorder?.chunk(chunk);
    }
    scanner.end();
    generationId ??= scanner.generationId;
    if (scanner.usage === null) {
      await f.handOver(ticket, "upstream_timeout", generationId);
      recorder?.failed(lateFailure());
    } else {
      await f.meter.finish(ticket, { status: "ok", usage: scanner.usage, generationId, completionEvents: scanner.events, producedNothing: false }, true);
      await recorder?.finished({ contentType: "text/event-stream", generationId });
    }
  } catch {
    await f.handOver(ticket, "upstream_timeout", generationId).catch(logFailure(f, ticket));
    recorder?.failed(lateFailure());
  } finally {
    clearTimeout(giveUp);
  }
}

function lateFailure(): ApiError {
  return new ApiError(
    "upstream",
    "the upstream did not answer in time; the call was charged from the upstream's record of it (or its reservation)",
    {},
    NO_RETRY,
  );
}

const logFailure = (f: CallFinisher, ticket: MeteringTicket) => (err: unknown) =>
  f.logger.error("handing a late call to the reconciler failed", { requestId: ticket.requestId, error: String(err) });
