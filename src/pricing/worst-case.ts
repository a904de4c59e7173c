/**
 * The worst case of one request for every model that could serve it: `model`, its
 * `models` fallbacks, and for a variable-priced router every listed model it could route
 * to under the price pin. Each model is bounded on its own (its fees, its prompt and output
 * rates, whether it reasons) and the request costs at most the priciest of them, so the
 * reservation covers whichever one actually serves (ARCHITECTURE.md §3 "The hard cap").
 * Without a fresh listing (none loaded, or its last load failed), nothing says a model does
 * not reason: every model is bounded as one that does.
 */
import { ApiError } from "../errors";
import type { ModelPrice } from "./model-price";
import type { PricePin } from "./price-pin";
import type { PricingCatalogue } from "./catalogue";
import { asksForReasoning, DEFAULT_WEB_RESULTS, type RequestShape } from "./request-shape";
import { atTierPrices } from "./service-tier";
import { toolPromptTokens } from "./tool-prompt";
import { DEFAULT_WEB_RESULT_NANO, webResultPrice } from "./web-results";

/** One model's worst case for the request, apart from the output limits sent. */
export interface ModelBound {
  id: string;
  /** Nano-dollars that do not scale with max_tokens: the request fee, images, web results, operator reservations. */
  fixedNano: number;
  /** An upper bound on the prompt's tokens. */
  promptTokens: number;
  /** Nano-dollars per prompt token: the highest input-side rate (prompt, cache write, ...). */
  promptPrice: number;
  /** Nano-dollars per output token: the highest of completion, reasoning and audio output. */
  outputPrice: number;
  reasons: boolean;
  /** The most completion tokens the model produces. */
  modelLimit: number;
}

export interface CostBounds {
  /** Every model that may serve the request; the reservation covers the priciest of them. */
  models: ModelBound[];
  /** Completions per request (`n`): every output token is multiplied by it. */
  choices: number;
  /** Output tokens billed whatever the limits: a rejected prediction's. */
  predictionTokens: number;
  /** What is sent as `provider.max_price`: the lower of the client's pin and the highest listed price. */
  pin: PricePin;
}

export interface BoundsInput {
  shape: RequestShape;
  /** Size of the client's JSON body: bytes bound the tokens of text (one token is at least one byte). */
  bodyBytes: number;
  clientPin: PricePin;
  /** Tokens one input image may cost; it is below every model's context length. */
  imageTokenBound: number;
  /** Nano-dollars per web result from the upstream's own engine (WEB_SEARCH_RESULT_USD); default $0.004. */
  engineResultNano?: number;
  /** The request's service tier (and speed) as a multiplier of the listed prices (./service-tier.ts); default 1. */
  priceMultiplier?: number;
}

export function costBounds(catalogue: PricingCatalogue, input: BoundsInput): CostBounds {
  const { shape, clientPin } = input;
  const models: ModelPrice[] = [];
  let online = false;
  for (const id of shape.modelIds) {
    const resolved = catalogue.resolve(id);
    if (!resolved)
      throw new ApiError("invalid_request", `unknown model ${JSON.stringify(id)}: the upstream's catalogue does not list it (see GET /api/v1/models)`);
    online ||= resolved.online;
    if (!resolved.price.variable) {
      models.push(resolved.price);
      continue;
    }
    // A router's price is that of the model it picks: bound it by every model it may pick under the pin.
    const reachable = catalogue.modelsWithin(clientPin.prompt, clientPin.completion);
    if (reachable.length === 0) {
      throw new ApiError(
        "invalid_request",
        `model ${JSON.stringify(id)} is variable-priced and no listed model fits under provider.max_price, so its cost cannot be bounded`,
      );
    }
    models.push(...reachable);
  }
  // A model whose entry says it does not reason is taken at its word only when the listing
  // is fresh and the request asks nothing of reasoning; otherwise it may reason, and is
  // bounded as a model that does: a reasoning budget reserved and sent (./reservation.ts).
  const mayReason = !catalogue.fresh || asksForReasoning(shape.reasoning);
  const candidates = mayReason ? models.map((m) => (m.reasons ? m : { ...m, reasons: true })) : models;
  const webResults = shape.webResults + (online ? DEFAULT_WEB_RESULTS : 0);
  refuseUnbounded(shape, candidates, webResults);
  // A premium tier bills every price of the provider at its rate: reserve and pin at it. The
  // pin is raised with the reservation: the upstream compares it with the price of the tier
  // it routes to, so a pin at the listed price would refuse every provider of that tier,
  // while one at the tier's price admits only what the reservation covers.
  const priced = candidates.map((m) => atTierPrices(m, input.priceMultiplier ?? 1));
  // The pin is the lower of the client's own and the priciest model that may serve the call.
  const pinned = (dimension: keyof PricePin) =>
    Math.min(
      clientPin[dimension],
      priced.reduce((max, m) => Math.max(max, m[dimension]), 0),
    );
  return {
    models: priced.map((m) => modelBound(m, shape, webResults, input)),
    choices: shape.choices,
    predictionTokens: shape.predictionBytes,
    pin: { prompt: pinned("prompt"), completion: pinned("completion"), request: pinned("request"), image: pinned("image") },
  };
}

function modelBound(m: ModelPrice, shape: RequestShape, webResults: number, input: BoundsInput): ModelBound {
  // Web results are added to the prompt, and media other than images has no size bound
  // in bytes: then only the context length bounds the prompt. A provider's tool-use prompt
  // is not in the body either, but it has a known size (./tool-prompt.ts).
  const addedTokens = shape.images * input.imageTokenBound + (shape.tools ? toolPromptTokens(m.id) : 0);
  const promptTokens =
    webResults > 0 || shape.opaqueMedia ? m.contextLength : Math.min(m.contextLength, Math.max(1, input.bodyBytes - shape.imageUrlBytes) + addedTokens);
  const webNano = webResults * webResultPrice(m, input.engineResultNano ?? DEFAULT_WEB_RESULT_NANO);
  return {
    id: m.id,
    fixedNano: Math.ceil(m.request + shape.images * m.image + webNano + shape.operatorReservedNano),
    promptTokens,
    promptPrice: Math.max(m.prompt, m.cacheWrite, shape.audioInput ? m.audio : 0, shape.images > 0 ? m.imageToken : 0),
    outputPrice: Math.max(m.completion, m.reasons ? m.internalReasoning : 0, shape.audioOutput ? m.audioOutput : 0),
    reasons: m.reasons,
    modelLimit: Math.max(1, m.maxCompletionTokens),
  };
}

/** One model's cost, rounded up: its fixed costs, the prompt at its input rate, the output at its output rate. */
function modelCostNano(m: ModelBound, promptTokens: number, outputTokens: number): number {
  return m.fixedNano + Math.ceil(promptTokens * m.promptPrice) + Math.ceil(outputTokens * m.outputPrice);
}

/**
 * Worst-case nano-dollars of the request sent with these limits: the priciest model that
 * may serve it. Reasoning tokens count only on models that reason.
 */
export function worstCaseNano(bounds: CostBounds, maxTokens: number, reasoningTokens: number): number {
  let worst = 0;
  for (const m of bounds.models) {
    const output = maxTokens + (m.reasons ? reasoningTokens : 0) + bounds.predictionTokens;
    worst = Math.max(worst, modelCostNano(m, m.promptTokens, bounds.choices * output));
  }
  return worst;
}

/** What a finished call costs at the worst-case rates, from the tokens it reports (an upstream without `usage.cost`). */
export function costAtWorstRates(bounds: CostBounds, promptTokens: number, outputTokens: number): number {
  let worst = 0;
  for (const m of bounds.models) worst = Math.max(worst, modelCostNano(m, promptTokens, outputTokens));
  return worst;
}

/** Dimensions billed per unit the request cannot bound: refused before anything is reserved. */
function refuseUnbounded(shape: RequestShape, models: ModelPrice[], webResults: number): void {
  for (const m of models) {
    const used = m.variableKeys.filter((key) => usesPricedKey(key, shape, webResults, m));
    if (used.length > 0) {
      throw new ApiError(
        "invalid_request",
        `${m.id} has a variable (-1) ${used.join(", ")} price that this request would be billed, so its cost cannot be bounded`,
      );
    }
  }
  const pricedImageOutput = models.find((m) => m.imageOutput > 0);
  if (shape.imageOutput && pricedImageOutput) {
    throw new ApiError(
      "invalid_request",
      `image output is billed per generated image on ${pricedImageOutput.id}, and their number cannot be bounded before the call`,
    );
  }
  const parsesFiles = shape.fileParts && shape.pdfEngine === null && models.find((m) => !m.inputModalities.includes("file"));
  if (parsesFiles) {
    throw new ApiError(
      "invalid_request",
      `${parsesFiles.id} does not read files natively, and the upstream's default PDF engine is billed per page, which cannot be bounded; ` +
        `send plugins: [{"id":"file-parser","pdf":{"engine":"pdf-text"}}]`,
    );
  }
}

/** Whether a request is billed on a `pricing` key (the spec's PublicPricing names). */
function usesPricedKey(key: string, shape: RequestShape, webResults: number, m: ModelPrice): boolean {
  switch (key) {
    case "image":
    case "image_token":
      return shape.images > 0;
    case "web_search":
      return webResults > 0;
    case "internal_reasoning":
      return m.reasons;
    case "audio":
      return shape.audioInput;
    case "audio_output":
      return shape.audioOutput;
    case "image_output":
      return shape.imageOutput;
    default:
      return true; // request, cache writes, and keys added later: assume billed
  }
}
