/**
 * The streamed (SSE) body of a chat completion, as OpenRouter writes it: `data: {chunk}`
 * events (object "chat.completion.chunk"), `: OPENROUTER PROCESSING` comments while waiting,
 * then `data: [DONE]` (the spec's `x-speakeasy-sse-sentinel`). Pull-based, so a slow reader
 * slows the writer, and cancellable from both sides (body cancel, request signal).
 */
import type { AnswerShape } from "./answer-shape";
import type { ContentPiece } from "./completion";
import { FrameSplitter } from "./frame-splitter";
import { Gate } from "./gate";
import { PACED_KEEPALIVE_MS, pacedMs } from "./pacing";
import type { Scenario } from "./scenario";
import { badJsonPayload, commentLine, multilineDataLines, paddingText } from "./wire-shapes";

export interface StreamPlan {
  id: string;
  /** The model that served: every chunk's `model`. */
  model: string;
  /** The provider that served: every chunk's `provider`. */
  provider: string;
  created: number;
  /** Reasoning produced before the content, in a few pieces; empty for most models. */
  reasoningPieces: ContentPiece[];
  /** Send the reasoning as `delta.reasoning` chunks (ChatStreamDelta.reasoning); hidden reasoning is produced all the same. */
  showReasoning: boolean;
  /** Each choice's content pieces: words, or slices of the JSON text or of the tool call's arguments. */
  pieces: ContentPiece[];
  finishReason: "stop" | "length" | "tool_calls";
  /** The usage object, or null when the scenario sends none. */
  usage: object | null;
  scenario: Scenario;
  /** Tokens a second the reasoning and content pieces are paced at (./pacing.ts); 0: unpaced. */
  tokensPerSecond: number;
  shape: AnswerShape;
  /** `n`: every event carries this many choices, each with the same delta. */
  choices: number;
}

/**
 * How a stream ended: as planned; with its mid-stream error chunk; cut by the mock
 * (`reset_mid_stream`); or because the reader went away (body cancelled, request aborted).
 */
export type StreamOutcome = "complete" | "error" | "reset" | "aborted";

export interface StreamHooks {
  /** A content chunk carrying `tokens` tokens (all its choices together) was handed to the stream. */
  onContent(tokens: number): void;
  /** The model produced `tokens` more reasoning tokens (sent or hidden). */
  onReasoning(tokens: number): void;
  /** Called once, when the stream ends. */
  onEnd(outcome: StreamOutcome): void;
  /**
   * Served over a socket: error the stream with `undefined`, which Bun.serve turns into a
   * silent connection cut (any other reason is also printed to stderr). In-process, readers
   * get a reason like fetch would give them.
   */
  overSocket: boolean;
}

/** What an in-process reader sees when the mock cuts the stream, like fetch's ECONNRESET. */
function resetError(): Error {
  return Object.assign(new TypeError("mock upstream: connection reset mid-stream (reset_mid_stream)"), {
    code: "ECONNRESET",
  });
}

class StreamReset extends Error {}

type Outcome = "complete" | "failed";

/**
 * The content piece at which a failing scenario (mid-stream error, stall, reset) strikes:
 * after `after` pieces, by default half of them; -1 when the scenario does not fail.
 */
export function failurePoint(s: Scenario, pieceCount: number): number {
  const failing = s.midStreamError || s.stallMidStream || s.resetMidStream;
  return failing ? Math.min(s.after ?? Math.ceil(pieceCount / 2), pieceCount) : -1;
}

const encoder = new TextEncoder();

async function* frames(plan: StreamPlan, gate: Gate, hooks: StreamHooks): AsyncGenerator<string, Outcome> {
  const s = plan.scenario;
  const lineEnd = s.crlf ? "\r\n" : "\n";
  const end = lineEnd + lineEnd;
  const keepalive = ": OPENROUTER PROCESSING" + end;
  // Every chunk starts the same way; build that once (OpenRouter's field order).
  const head =
    `{"id":${JSON.stringify(plan.id)},"provider":${JSON.stringify(plan.provider)},"model":${JSON.stringify(plan.model)},` +
    `"object":"chat.completion.chunk","created":${plan.created},"choices":[`;
  const choiceAt = (index: number, delta: string, finish: string | null) =>
    `{"index":${index},"delta":${delta},"finish_reason":${finish},"native_finish_reason":${finish},"logprobs":null}`;
  // The same delta for each of the `n` choices, in one event.
  const choice = (delta: string, finish: string | null) => Array.from({ length: plan.choices }, (_, index) => choiceAt(index, delta, finish)).join(",");
  // A tool call's first piece names it; the rest add to its arguments (ChatStreamToolCall).
  const shape = plan.shape;
  const toolDelta = (text: string, first: boolean) =>
    shape.kind !== "tool_call"
      ? null
      : `{"tool_calls":[{"index":0,${first ? `"id":${JSON.stringify(shape.id)},"type":"function",` : ""}"function":{${first ? `"name":${JSON.stringify(shape.name)},` : ""}"arguments":${JSON.stringify(text)}}}]}`;
  const emptyDelta = `{"role":"assistant","content":""}`;
  const usage = plan.usage === null ? null : JSON.stringify(plan.usage);

  // One data event in the scenario's wire shape. `comments` alternates a comment in its own
  // block (between events) with one inside the event, before its data lines.
  let eventCount = 0;
  const event = (payload: string) => {
    const n = eventCount++;
    const comment = s.comments ? commentLine(n) + (n % 2 === 0 ? end : lineEnd) : "";
    return comment + (s.multilineData ? multilineDataLines(payload, lineEnd) : "data: " + payload) + end;
  };
  // `big_line` / `pad_lines`: the content padded so that `data: {payload}` is exactly that many bytes.
  const contentPayload = (text: string, padTo: number | null, first: boolean) => {
    const tool = toolDelta(text, first);
    if (tool !== null) return head + choice(tool, "null") + "]}";
    const payload = head + choice(`{"content":${JSON.stringify(text)}}`, "null") + "]}";
    // Padding is words' business: it would make a JSON answer unparseable.
    if (padTo === null || shape.kind !== "words") return payload;
    const padding = paddingText(padTo - encoder.encode("data: " + payload).length);
    return head + choice(`{"content":${JSON.stringify(text + padding)}}`, "null") + "]}";
  };

  async function* wait(ms: number, keepaliveMs = s.keepaliveMs): AsyncGenerator<string, void> {
    let left = ms;
    while (keepaliveMs > 0 && left > keepaliveMs && !gate.closed) {
      await gate.sleep(keepaliveMs);
      if (!gate.closed) yield keepalive;
      left -= keepaliveMs;
    }
    if (left > 0) await gate.sleep(left);
  }

  // Before a reasoning or content piece: the scenario's pause, then, when paced, the time the
  // piece's tokens take, with keep-alives through a long one (./pacing.ts).
  const beforePiece = (tokens: number) => {
    const paced = pacedMs(tokens, plan.tokensPerSecond);
    return wait(s.pauseMs + paced, paced > 0 && s.keepaliveMs === 0 ? PACED_KEEPALIVE_MS : s.keepaliveMs);
  };

  async function* fail(): AsyncGenerator<string, void> {
    if (s.resetMidStream) {
      // Let what was written reach the socket first, or the cut would come before the headers.
      await gate.sleep(Math.max(s.pauseMs, 10));
      throw new StreamReset();
    }
    if (s.midStreamError) {
      // An error after tokens were sent arrives as a chunk with a top-level `error` and
      // finish_reason "error" (components.schemas.ChatStreamChunk.error); then the stream ends.
      const error = `{"code":502,"message":"Provider disconnected unexpectedly","metadata":{"error_type":"provider_unavailable","provider_code":"mock_disconnect"}}`;
      yield event(head + choiceAt(0, `{"content":""}`, `"error"`) + `],"error":${error}}`);
      return;
    }
    // stall_mid_stream: nothing more, ever (but keep-alives if asked), until closed.
    while (!gate.closed) {
      if (s.keepaliveMs > 0) {
        await gate.sleep(s.keepaliveMs);
        if (!gate.closed) yield keepalive;
      } else {
        await gate.forever();
      }
    }
  }

  const failAt = failurePoint(s, plan.pieces.length);

  yield* wait(s.pauseMs);
  if (gate.closed) return "failed";
  yield event(head + choice(emptyDelta, "null") + "]}");
  if (s.badJson) yield event(badJsonPayload(plan.id));
  for (const piece of plan.reasoningPieces) {
    yield* beforePiece(piece.tokens);
    if (gate.closed) return "failed";
    // Counted as it is produced: an abort bills the reasoning done so far, shown or not.
    hooks.onReasoning(piece.tokens * plan.choices);
    if (plan.showReasoning) yield event(head + choice(`{"content":"","reasoning":${JSON.stringify(piece.text)}}`, "null") + "]}");
  }

  for (let k = 0; k <= plan.pieces.length; k++) {
    if (k === failAt) {
      yield* fail();
      return "failed";
    }
    const piece = plan.pieces[k];
    if (!piece) break;
    yield* beforePiece(piece.tokens);
    if (gate.closed) return "failed";
    hooks.onContent(piece.tokens * plan.choices);
    yield event(contentPayload(piece.text, k === 0 && s.bigLine !== null ? s.bigLine : s.padLines, k === 0));
  }

  const finish = `"${plan.finishReason}"`;
  if (usage !== null && s.usageShape === "in_finish") {
    yield event(head + choice(emptyDelta, finish) + `],"usage":${usage}}`);
  } else {
    yield event(head + choice(emptyDelta, finish) + "]}");
    if (usage !== null) {
      const choices = s.usageShape === "empty_choice" ? choiceAt(0, emptyDelta, "null") : "";
      yield event(head + choices + `],"usage":${usage}}`);
    }
  }
  if (!s.noDone) yield "data: [DONE]" + end;
  return "complete";
}

export function sseBody(plan: StreamPlan, signal: AbortSignal, hooks: StreamHooks): ReadableStream<Uint8Array> {
  const gate = new Gate();
  const generator = frames(plan, gate, hooks);
  const splitter = plan.scenario.splitFrames ? new FrameSplitter() : null;
  let pending: Uint8Array[] = [];
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let ended = false;

  const end = (outcome: StreamOutcome) => {
    if (ended) return;
    ended = true;
    gate.close();
    signal.removeEventListener("abort", onAbort);
    hooks.onEnd(outcome);
  };
  // The request's signal aborts when the client goes away (Bun.serve) or the in-process
  // caller aborts; like fetch, a read after that fails with the abort reason.
  function onAbort() {
    if (ended) return;
    end("aborted");
    controller.error(hooks.overSocket ? undefined : signal.reason);
  }

  return new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    },
    async pull(c) {
      try {
        if (pending.length > 0) {
          // One split write per pull, a moment apart, so that they also leave a real socket
          // as separate writes instead of being coalesced into one.
          await gate.sleep(1);
          if (!ended) c.enqueue(pending.shift()!);
          return;
        }
        const step = await generator.next();
        if (ended) return;
        if (step.done) {
          const rest = splitter?.flush();
          if (rest) c.enqueue(rest);
          c.close();
          // The generator returns "failed" before the end only after its mid-stream error chunk.
          end(step.value === "complete" ? "complete" : "error");
          return;
        }
        const bytes = encoder.encode(step.value);
        if (splitter) {
          pending = splitter.push(bytes);
          c.enqueue(pending.shift()!);
        } else {
          c.enqueue(bytes);
        }
      } catch (err) {
        if (ended) return;
        end("reset");
        if (!(err instanceof StreamReset)) throw err;
        c.error(hooks.overSocket ? undefined : resetError());
      }
    },
    cancel() {
      end("aborted");
    },
  });
}
