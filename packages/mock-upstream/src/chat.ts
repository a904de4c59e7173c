/**
 * POST /chat/completions of the mock upstream: request checks in OpenRouter's order
 * (auth, body, model), then routing (fallbacks, routers, providers within max_price, see
 * ./routing.ts), then the key's credit (./credit.ts), then the scenario decides between an
 * error, a stall and a completion, priced as OpenRouter documents (./billing.ts), answered by
 * ./chat-answer.ts and billed in the end, to the key that called, by how it ended
 * (./generation.ts).
 */
import { authenticate } from "./bearer";
import { billFor, toolPromptTokens, totalPromptTokens, usageObject } from "./billing";
import { readAnswerShape, readChoices, type AnswerShape } from "./answer-shape";
import { answerCompletion, plannedEnd } from "./chat-answer";
import { BadRequest, candidateModels, readBillableRequest, webResultsFor } from "./chat-request";
import { estimatePromptTokens, messageText, plannedReasoningTokens } from "./completion";
import { creditRefusal } from "./credit";
import { errorResponse } from "./errors";
import { Generation, NO_OUTPUT } from "./generation";
import type { GenerationLog } from "./generation-log";
import type { KeyBook } from "./keys";
import type { MockModel } from "./models";
import { findModel, routeRequest } from "./routing";
import { resolveScenario, type ScenarioInput } from "./scenario";
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
  generations: GenerationLog;
  /** MockUpstreamOptions.generationRecordDelayMs. */
  recordDelayMs: number;
  /** MockUpstreamOptions.streamTokensPerSecond. */
  streamTokensPerSecond: number;
  /** The keys that may call, and what each has spent (./keys.ts). */
  keys: KeyBook;
}

export async function handleChat(request: Request, ctx: ChatContext): Promise<Response> {
  const now = ctx.now();
  const created = Math.floor(now / 1000);
  const entry: ServedRequest = {
    id: ctx.nextId(created),
    model: "",
    servedModel: "",
    provider: "",
    stream: false,
    maxTokens: null,
    promptTokens: 0,
    completionTokens: 0,
    reasoningTokens: 0,
    deliveredTokens: 0,
    images: 0,
    webResults: 0,
    cacheWriteTokens: 0,
    costUsd: 0,
    scenario: null,
    status: 200,
    completed: false,
    aborted: false,
    cancelled: false,
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

  const caller = authenticate(request, ctx.keys, now);
  if (!("account" in caller)) return fail(401, caller.message);
  const payer = caller.account;

  let body: Record<string, unknown>;
  try {
    body = JSON.parse(await request.text()) as Record<string, unknown>;
    entry.body = body;
  } catch {
    return fail(400, "Invalid JSON in request body");
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) return fail(400, "Request body must be a JSON object");
  let candidates: string[];
  try {
    candidates = candidateModels(body);
  } catch (err) {
    if (err instanceof BadRequest) return fail(400, err.message);
    throw err;
  }
  if (candidates.length === 0) return fail(400, "No models provided");
  entry.model = candidates[0]!;
  entry.stream = body.stream === true;
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) return fail(400, 'Input required: specify "prompt" or "messages"');
  const limit = body.max_tokens ?? body.max_completion_tokens;
  if (limit !== undefined && limit !== null && (!Number.isSafeInteger(limit) || (limit as number) < 1)) {
    return fail(400, "max_tokens must be a positive integer");
  }
  const maxTokens = typeof limit === "number" ? limit : null;
  entry.maxTokens = maxTokens;

  const unknown = candidates.find((id) => !findModel(ctx.models, id));
  if (unknown !== undefined) return fail(400, `${unknown} is not a valid model ID`);

  const { scenario, errors } = resolveScenario(ctx.defaults, messageText(messages[messages.length - 1]));
  if (errors.length > 0) return fail(400, errors.join("; "));
  entry.scenario = scenario;

  let billable: ReturnType<typeof readBillableRequest>;
  let shape: AnswerShape;
  let choices: number;
  try {
    billable = readBillableRequest(body, messages);
    choices = readChoices(body);
    shape = readAnswerShape(body, messages, entry.id, scenario.tokens);
  } catch (err) {
    if (err instanceof BadRequest) return fail(400, err.message);
    throw err;
  }
  const routed = routeRequest(ctx.models, candidates, scenario.failOver, billable.maxPrice);
  if (!("route" in routed)) return fail(routed.status, routed.message);
  const { model, provider, multiplier, online } = routed.route;
  entry.servedModel = model.id;
  entry.provider = provider;

  const webResults = webResultsFor(billable, online);
  const promptTokens = totalPromptTokens(
    scenario.promptTokens ?? estimatePromptTokens(messages),
    billable.images,
    scenario.imageTokens,
    webResults,
    scenario.resultTokens,
    toolPromptTokens(model, billable.tools),
  );
  entry.promptTokens = promptTokens;
  if (promptTokens + (maxTokens ?? 0) > model.contextLength) {
    return fail(
      400,
      `This endpoint's maximum context length is ${model.contextLength} tokens. However, you requested about ${promptTokens + (maxTokens ?? 0)} tokens.`,
    );
  }

  const contentTokens = Math.min(maxTokens ?? Infinity, scenario.tokens);
  const reasoningTokens = plannedReasoningTokens(model, scenario, billable.reasoning);
  // The serving provider's prices at the request's service tier (./billing.ts).
  const priceMultiplier = multiplier * billable.tierMultiplier;
  // Each of the `n` choices is a whole completion, billed as one (./answer-shape.ts).
  const work = {
    promptTokens,
    images: billable.images,
    webResults,
    cacheWrite: billable.cacheWrite,
    contentTokens: contentTokens * choices,
    reasoningTokens: reasoningTokens * choices,
  };
  // OpenRouter refuses what the key cannot pay before any provider is asked (./credit.ts).
  const refusal = creditRefusal(payer, now, model, priceMultiplier, work, maxTokens, choices);
  if (refusal) return fail(refusal.status, refusal.message);

  if (scenario.stallBeforeHeaders) return stallUntilAborted(request.signal, entry);
  if (scenario.status !== null) {
    if (scenario.status === 429) headers.set("retry-after", String(scenario.retryAfter));
    return fail(scenario.status);
  }

  const bill = billFor(model, priceMultiplier, work);
  Object.assign(entry, {
    completionTokens: bill.completionTokens,
    reasoningTokens: bill.reasoningTokens,
    images: bill.images,
    webResults: bill.webResults,
    cacheWriteTokens: bill.cacheWriteTokens,
    costUsd: bill.costUsd,
  });
  headers.set("x-generation-id", entry.id);
  const finishReason = contentTokens < scenario.tokens ? "length" : shape.kind === "tool_call" ? "tool_calls" : "stop";
  const generation = new Generation({
    entry,
    work,
    plannedBill: bill,
    bill: (other) => billFor(model, priceMultiplier, other),
    planned: plannedEnd(entry.stream, scenario, contentTokens, reasoningTokens, finishReason, choices),
    cancellable: scenario.cancellable ?? routed.route.cancellable,
    router: routed.route.router,
    recordDelayMs: scenario.recordAfterMs ?? ctx.recordDelayMs,
    log: ctx.generations,
    now: ctx.now,
    charge: (usd) => ctx.keys.charge(payer, usd, ctx.now()),
  });

  if (scenario.error200) {
    // OpenRouter's error docs: once the model started processing, errors come back in a 200
    // body. The generation exists (its id is in the header) and ended in an error.
    entry.completed = true;
    generation.end({ kind: "failed", produced: NO_OUTPUT });
    return errorResponse(502, headers, { httpStatus: 200 });
  }
  if (scenario.delayMs > 0 && !(await answerAfter(scenario.delayMs, request.signal))) {
    // The client left before the answer: a stream's generation is cancelled (if its provider
    // can be), anything else runs on and is billed in full. Rejects like fetch, as a stall does.
    entry.aborted = true;
    generation.end({ kind: "disconnected", produced: NO_OUTPUT });
    throw request.signal.reason;
  }
  return answerCompletion(request, ctx.overSocket, headers, entry, generation, {
    created,
    contentTokens,
    finishReason,
    reasoningTokens,
    showReasoning: !billable.reasoning.hidden,
    usage: scenario.noUsage ? null : usageObject(bill, !scenario.noCost),
    scenario,
    tokensPerSecond: ctx.streamTokensPerSecond,
    shape,
    choices,
  });
}

/** `delay_ms`: true once `ms` have passed, false as soon as the request is aborted. */
function answerAfter(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const abort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", abort);
      resolve(true);
    }, ms);
    signal.addEventListener("abort", abort, { once: true });
  });
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
