/**
 * The 200 answer of a served completion: a JSON ChatResult (components.schemas.ChatResult),
 * possibly cut mid-body, or an SSE stream of ChatStreamChunk events, with `n` choices of the
 * answer's shape (words, JSON, a tool call: ./answer-shape.ts). `model` is the model that
 * served (after fallbacks and routing) and `provider` the provider that served it.
 * It tells the generation how it ended, which decides the final bill (./generation.ts).
 */
import { shapedText, type AnswerShape } from "./answer-shape";
import { completionText, contentPieces, pieceCount, tokensInPieces } from "./completion";
import type { Generation, PlannedEnd } from "./generation";
import { partialJsonBody } from "./json-body";
import type { Scenario } from "./scenario";
import { failurePoint, sseBody, type StreamOutcome, type StreamPlan } from "./sse-stream";
import type { ServedRequest } from "./types";

export interface Completion {
  created: number;
  /** Content tokens of each choice. */
  contentTokens: number;
  finishReason: "stop" | "length" | "tool_calls";
  reasoningTokens: number;
  /** Return the reasoning text (it is billed either way). */
  showReasoning: boolean;
  /** The usage object, or null when the scenario sends none. */
  usage: object | null;
  scenario: Scenario;
  /** A stream's pace in tokens a second (MockUpstreamOptions.streamTokensPerSecond); 0: unpaced. */
  tokensPerSecond: number;
  shape: AnswerShape;
  /** `n`: how many choices carry the answer, each a whole completion. */
  choices: number;
}

/** Reasoning arrives before the content in a few `delta.reasoning` chunks, not one per token. */
const REASONING_CHUNKS = 8;

/**
 * Where a generation's plan ends, its tokens counted over all `choices`. A stream planned to
 * meet a mid-stream error ends there, with the content before it; every other plan ends with
 * its whole completion (a stall or a cut is the connection's failure, not the model's).
 */
export function plannedEnd(
  stream: boolean,
  scenario: Scenario,
  contentTokens: number,
  reasoningTokens: number,
  finishReason: PlannedEnd["finishReason"],
  choices: number,
): PlannedEnd {
  if (stream && scenario.midStreamError && !scenario.resetMidStream) {
    const failAt = failurePoint(scenario, pieceCount(contentTokens, scenario.chunks));
    return {
      contentTokens: tokensInPieces(failAt, contentTokens, scenario.chunks) * choices,
      reasoningTokens: reasoningTokens * choices,
      finishReason: "error",
    };
  }
  return { contentTokens: contentTokens * choices, reasoningTokens: reasoningTokens * choices, finishReason };
}

/** One choice's message: the content, or the tool call whose arguments the content tokens spell. */
function message(completion: Completion, plannedTokens: number, reasoning: string | null): Record<string, unknown> {
  const { shape } = completion;
  const text = shapedText(shape, 0, completion.contentTokens, plannedTokens);
  if (shape.kind !== "tool_call") return { role: "assistant", content: text, refusal: null, reasoning };
  const call = { id: shape.id, type: "function", function: { name: shape.name, arguments: text } };
  return { role: "assistant", content: null, refusal: null, reasoning, tool_calls: [call] };
}

export function answerCompletion(
  request: Request,
  overSocket: boolean,
  headers: Headers,
  entry: ServedRequest,
  generation: Generation,
  completion: Completion,
): Response {
  const { scenario } = completion;
  const reasoningShown = completion.showReasoning ? completion.reasoningTokens : 0;
  const textOf = (from: number, to: number) => shapedText(completion.shape, from, to, scenario.tokens);
  if (!entry.stream) {
    const reasoning = reasoningShown > 0 ? completionText(reasoningShown) : null;
    const choice = message(completion, scenario.tokens, reasoning);
    const result: Record<string, unknown> = {
      id: entry.id,
      provider: entry.provider,
      model: entry.servedModel,
      object: "chat.completion",
      created: completion.created,
      choices: Array.from({ length: completion.choices }, (_, index) => ({
        logprobs: null,
        finish_reason: completion.finishReason,
        native_finish_reason: completion.finishReason,
        index,
        message: choice,
      })),
      system_fingerprint: null,
    };
    if (completion.usage) result.usage = completion.usage;
    headers.set("content-type", "application/json");
    // A JSON answer is whole before its first byte leaves: the generation has ended, and it
    // is billed in full whatever happens to the body (OpenRouter's streaming page).
    generation.end({ kind: "completed" });
    if (scenario.resetMidStream || scenario.stallMidStream) {
      // Half the body, then a cut or silence: nothing usable was delivered.
      const mode = scenario.resetMidStream ? "reset" : "stall";
      const body = partialJsonBody(JSON.stringify(result), mode, request.signal, { onAbort: () => (entry.aborted = true), overSocket });
      return new Response(body, { status: 200, headers });
    }
    entry.deliveredTokens = completion.contentTokens * completion.choices;
    entry.completed = true;
    return new Response(JSON.stringify(result), { status: 200, headers });
  }

  headers.set("content-type", "text/event-stream");
  headers.set("cache-control", "no-cache");
  const plan: StreamPlan = {
    id: entry.id,
    model: entry.servedModel,
    provider: entry.provider,
    created: completion.created,
    reasoningPieces: contentPieces(completion.reasoningTokens, Math.min(REASONING_CHUNKS, completion.reasoningTokens)),
    showReasoning: completion.showReasoning,
    pieces: contentPieces(completion.contentTokens, scenario.chunks, textOf),
    finishReason: completion.finishReason,
    usage: completion.usage,
    scenario,
    tokensPerSecond: completion.tokensPerSecond,
    shape: completion.shape,
    choices: completion.choices,
  };
  let reasoningProduced = 0;
  const stream = sseBody(plan, request.signal, {
    onContent: (tokens) => {
      entry.deliveredTokens += tokens;
    },
    onReasoning: (tokens) => {
      reasoningProduced += tokens;
    },
    onEnd: (outcome: StreamOutcome) => {
      entry.completed = outcome === "complete";
      entry.aborted = outcome === "aborted";
      const produced = { contentTokens: entry.deliveredTokens, reasoningTokens: reasoningProduced };
      if (outcome === "complete") generation.end({ kind: "completed" });
      else if (outcome === "error") generation.end({ kind: "failed", produced });
      // A cut connection is, to the upstream, the same as a client that went away.
      else generation.end({ kind: "disconnected", produced });
    },
    overSocket,
  });
  return new Response(stream, { status: 200, headers });
}
