/**
 * The 200 answer of a served completion: a JSON ChatResult (components.schemas.ChatResult),
 * possibly cut mid-body, or an SSE stream of ChatStreamChunk events. `model` is the model
 * that served (after fallbacks and routing) and `provider` the provider that served it.
 */
import { completionText, contentPieces } from "./completion";
import { partialJsonBody } from "./json-body";
import type { Scenario } from "./scenario";
import { sseBody, type StreamPlan } from "./sse-stream";
import type { ServedRequest } from "./types";

export interface Completion {
  created: number;
  contentTokens: number;
  finishReason: "stop" | "length";
  reasoningTokens: number;
  /** Return the reasoning text (it is billed either way). */
  showReasoning: boolean;
  /** The usage object, or null when the scenario sends none. */
  usage: object | null;
  scenario: Scenario;
}

/** Reasoning arrives before the content in a few `delta.reasoning` chunks, not one per token. */
const REASONING_CHUNKS = 8;

export function answerCompletion(request: Request, overSocket: boolean, headers: Headers, entry: ServedRequest, completion: Completion): Response {
  const { scenario } = completion;
  const reasoningShown = completion.showReasoning ? completion.reasoningTokens : 0;
  if (!entry.stream) {
    const result: Record<string, unknown> = {
      id: entry.id,
      provider: entry.provider,
      model: entry.servedModel,
      object: "chat.completion",
      created: completion.created,
      choices: [
        {
          logprobs: null,
          finish_reason: completion.finishReason,
          native_finish_reason: completion.finishReason,
          index: 0,
          message: {
            role: "assistant",
            content: completionText(completion.contentTokens),
            refusal: null,
            reasoning: reasoningShown > 0 ? completionText(reasoningShown) : null,
          },
        },
      ],
      system_fingerprint: null,
    };
    if (completion.usage) result.usage = completion.usage;
    headers.set("content-type", "application/json");
    if (scenario.resetMidStream || scenario.stallMidStream) {
      // Half the body, then a cut or silence: nothing usable was delivered.
      const mode = scenario.resetMidStream ? "reset" : "stall";
      const body = partialJsonBody(JSON.stringify(result), mode, request.signal, { onAbort: () => (entry.aborted = true), overSocket });
      return new Response(body, { status: 200, headers });
    }
    entry.deliveredTokens = completion.contentTokens;
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
    reasoningPieces: contentPieces(reasoningShown, Math.min(REASONING_CHUNKS, reasoningShown)),
    pieces: contentPieces(completion.contentTokens, scenario.chunks),
    finishReason: completion.finishReason,
    usage: completion.usage,
    scenario,
  };
  const stream = sseBody(plan, request.signal, {
    onContent: (tokens) => {
      entry.deliveredTokens += tokens;
    },
    onEnd: (completed, aborted) => {
      entry.completed = completed;
      entry.aborted = aborted;
    },
    overSocket,
  });
  return new Response(stream, { status: 200, headers });
}
