/**
 * POST /chat/completions of the mock upstream: request checks in OpenRouter's order
 * (auth, body, model), then the scenario decides between an error, a stall, a JSON
 * completion (components.schemas.ChatResult) and a stream (ChatStreamChunk events).
 */
import { completionText, contentPieces, costUsd, estimatePromptTokens, messageText, usageObject } from "./completion";
import { errorResponse } from "./errors";
import { partialJsonBody } from "./json-body";
import type { MockModel } from "./models";
import { resolveScenario, type ScenarioInput } from "./scenario";
import { sseBody } from "./sse-stream";
import type { ServedRequest } from "./types";

export interface ChatContext {
  models: MockModel[];
  defaults: ScenarioInput;
  now(): number;
  nextId(createdSeconds: number): string;
  /** Response headers every chat answer carries (rate limits), fresh per call. */
  baseHeaders(): Headers;
  record(entry: ServedRequest): void;
  /** Served by startMockUpstream (see StreamHooks.overSocket). */
  overSocket: boolean;
}

interface ChatBody {
  model?: unknown;
  messages?: unknown;
  stream?: unknown;
  max_tokens?: unknown;
  max_completion_tokens?: unknown;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

export async function handleChat(request: Request, ctx: ChatContext): Promise<Response> {
  const now = ctx.now();
  const created = Math.floor(now / 1000);
  const entry: ServedRequest = {
    id: ctx.nextId(created),
    model: "",
    stream: false,
    maxTokens: null,
    promptTokens: 0,
    completionTokens: 0,
    deliveredTokens: 0,
    costUsd: 0,
    scenario: null,
    status: 200,
    completed: false,
    aborted: false,
    receivedAt: now,
    headers: Object.fromEntries(request.headers),
    body: undefined,
  };
  ctx.record(entry);
  const headers = ctx.baseHeaders();
  const fail = (status: number, message?: string) => {
    entry.status = status;
    entry.completed = true;
    return errorResponse(status, headers, { message });
  };

  if (!BEARER.test(request.headers.get("authorization") ?? "")) {
    return fail(401, request.headers.has("authorization") ? "Invalid Authorization header" : undefined);
  }

  let body: ChatBody;
  try {
    body = JSON.parse(await request.text()) as ChatBody;
    entry.body = body;
  } catch {
    return fail(400, "Invalid JSON in request body");
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) return fail(400, "Request body must be a JSON object");
  if (typeof body.model !== "string" || body.model === "") return fail(400, "No models provided");
  entry.model = body.model;
  entry.stream = body.stream === true;
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) return fail(400, 'Input required: specify "prompt" or "messages"');
  const limit = body.max_tokens ?? body.max_completion_tokens;
  if (limit !== undefined && limit !== null && (!Number.isSafeInteger(limit) || (limit as number) < 1)) {
    return fail(400, "max_tokens must be a positive integer");
  }
  const maxTokens = typeof limit === "number" ? limit : null;
  entry.maxTokens = maxTokens;

  const model = ctx.models.find((m) => m.id === body.model);
  if (!model) return fail(400, `${body.model} is not a valid model ID`);

  const { scenario, errors } = resolveScenario(ctx.defaults, messageText(messages[messages.length - 1]));
  if (errors.length > 0) return fail(400, errors.join("; "));
  entry.scenario = scenario;

  const promptTokens = estimatePromptTokens(messages);
  entry.promptTokens = promptTokens;
  if (promptTokens + (maxTokens ?? 0) > model.contextLength) {
    return fail(
      400,
      `This endpoint's maximum context length is ${model.contextLength} tokens. However, you requested about ${promptTokens + (maxTokens ?? 0)} tokens.`,
    );
  }

  if (scenario.stallBeforeHeaders) return stallUntilAborted(request.signal, entry);
  if (scenario.status !== null) {
    if (scenario.status === 429) headers.set("retry-after", String(scenario.retryAfter));
    return fail(scenario.status);
  }
  if (scenario.error200) {
    // OpenRouter: once the model started processing, errors come back in a 200 body.
    entry.completed = true;
    return errorResponse(502, headers, { httpStatus: 200 });
  }

  const completionTokens = Math.min(maxTokens ?? Infinity, scenario.tokens);
  const finishReason = completionTokens < scenario.tokens ? "length" : "stop";
  entry.completionTokens = completionTokens;
  entry.costUsd = costUsd(model, promptTokens, completionTokens);
  const usage = scenario.noUsage ? null : usageObject(model, promptTokens, completionTokens, !scenario.noCost);
  headers.set("x-generation-id", entry.id);

  if (!entry.stream) {
    const result: Record<string, unknown> = {
      id: entry.id,
      provider: "Mock",
      model: model.id,
      object: "chat.completion",
      created,
      choices: [
        {
          logprobs: null,
          finish_reason: finishReason,
          native_finish_reason: finishReason,
          index: 0,
          message: { role: "assistant", content: completionText(completionTokens), refusal: null, reasoning: null },
        },
      ],
      system_fingerprint: null,
    };
    if (usage) result.usage = usage;
    headers.set("content-type", "application/json");
    if (scenario.resetMidStream || scenario.stallMidStream) {
      // Half the body, then a cut or silence: nothing usable was delivered.
      const mode = scenario.resetMidStream ? "reset" : "stall";
      const body = partialJsonBody(JSON.stringify(result), mode, request.signal, { onAbort: () => (entry.aborted = true), overSocket: ctx.overSocket });
      return new Response(body, { status: 200, headers });
    }
    entry.deliveredTokens = completionTokens;
    entry.completed = true;
    return new Response(JSON.stringify(result), { status: 200, headers });
  }

  headers.set("content-type", "text/event-stream");
  headers.set("cache-control", "no-cache");
  const plan = {
    id: entry.id,
    model: model.id,
    created,
    pieces: contentPieces(completionTokens, scenario.chunks),
    finishReason,
    usage,
    scenario,
  } as const;
  const stream = sseBody(plan, request.signal, {
    onContent: (tokens) => {
      entry.deliveredTokens += tokens;
    },
    onEnd: (completed, aborted) => {
      entry.completed = completed;
      entry.aborted = aborted;
    },
    overSocket: ctx.overSocket,
  });
  return new Response(stream, { status: 200, headers });
}

/** `stall_before_headers`: no answer at all; rejects like fetch when the request is aborted. */
function stallUntilAborted(signal: AbortSignal, entry: ServedRequest): Promise<Response> {
  return new Promise((_, reject) => {
    const abort = () => {
      entry.aborted = true;
      reject(signal.reason);
    };
    if (signal.aborted) abort();
    else signal.addEventListener("abort", abort, { once: true });
  });
}
