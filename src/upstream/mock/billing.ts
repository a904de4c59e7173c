/**
 * What a served generation costs, billed the way OpenRouter documents its prices
 * (components.schemas.PublicPricing): tokens at `prompt` and `completion`, a `request` fee,
 * `image` per input image, `web_search` per search result, `internal_reasoning` per reasoning
 * token and `input_cache_write` per prompt token written to the cache. Every price is the
 * serving provider's: the listed one times its multiplier.
 */
import type { MockModel } from "./models";

/** The counts a bill is made of. */
export interface BilledWork {
  /** All prompt tokens: the text's, plus those images and web results add. */
  promptTokens: number;
  images: number;
  webResults: number;
  /** The request marked a `cache_control` breakpoint (billed only where the model prices cache writes). */
  cacheWrite: boolean;
  /** Completion tokens of the answer itself (limited by max_tokens). */
  contentTokens: number;
  /** Reasoning tokens (not limited by max_tokens). */
  reasoningTokens: number;
}

export interface Bill {
  promptTokens: number;
  /** Content plus reasoning tokens: OpenRouter counts reasoning inside completion_tokens. */
  completionTokens: number;
  reasoningTokens: number;
  cacheWriteTokens: number;
  images: number;
  webResults: number;
  /** Everything on the input side: prompt tokens (or cache writes), the request fee, images, web results. */
  promptCostUsd: number;
  /** Content and reasoning tokens. */
  completionsCostUsd: number;
  costUsd: number;
}

/**
 * Catalogue prices have at most ~10 decimals, so every product here is exact at 1e-12;
 * rounding there removes binary float noise without moving the value.
 */
function roundUsd(usd: number): number {
  return Math.round(usd * 1e12) / 1e12;
}

/** Prompt tokens of a request: its text, plus what each image and each web result adds. */
export function totalPromptTokens(textTokens: number, images: number, imageTokens: number, webResults: number, resultTokens: number): number {
  return textTokens + images * imageTokens + webResults * resultTokens;
}

export function billFor(model: MockModel, multiplier: number, work: BilledWork): Bill {
  const price = (value: string | undefined) => Number(value ?? "0") * multiplier;
  const pricing = model.pricing;
  // Anthropic-style caching: with a breakpoint, the whole prompt is written at the cache-write rate.
  const cacheWriteTokens = work.cacheWrite && pricing.input_cache_write !== undefined ? work.promptTokens : 0;
  const promptSide =
    (work.promptTokens - cacheWriteTokens) * price(pricing.prompt) +
    cacheWriteTokens * price(pricing.input_cache_write) +
    price(pricing.request) +
    work.images * price(pricing.image) +
    work.webResults * price(pricing.web_search);
  const completionSide = work.contentTokens * price(pricing.completion) + work.reasoningTokens * price(pricing.internal_reasoning ?? pricing.completion);
  return {
    promptTokens: work.promptTokens,
    completionTokens: work.contentTokens + work.reasoningTokens,
    reasoningTokens: work.reasoningTokens,
    cacheWriteTokens,
    images: work.images,
    webResults: work.webResults,
    promptCostUsd: roundUsd(promptSide),
    completionsCostUsd: roundUsd(completionSide),
    costUsd: roundUsd(promptSide + completionSide),
  };
}

/**
 * The `usage` object as OpenRouter sends it (components.schemas.ChatUsage), in its field
 * order. Without cost (`no_cost` scenario), both `cost` and `cost_details` are left out.
 * `cache_write_tokens` and `server_tool_use_details` appear only when there was such work.
 */
export function usageObject(bill: Bill, withCost: boolean) {
  const promptDetails: { cached_tokens: number; cache_write_tokens?: number } = { cached_tokens: 0 };
  if (bill.cacheWriteTokens > 0) promptDetails.cache_write_tokens = bill.cacheWriteTokens;
  const base = {
    prompt_tokens: bill.promptTokens,
    completion_tokens: bill.completionTokens,
    total_tokens: bill.promptTokens + bill.completionTokens,
  };
  const completionDetails = { reasoning_tokens: bill.reasoningTokens };
  // One search per request, however many results it returned (ServerToolUseDetails).
  const toolUse = bill.webResults > 0 ? { server_tool_use_details: { web_search_requests: 1 } } : {};
  if (!withCost) {
    return { ...base, is_byok: false, prompt_tokens_details: promptDetails, completion_tokens_details: completionDetails, ...toolUse };
  }
  return {
    ...base,
    cost: bill.costUsd,
    is_byok: false,
    prompt_tokens_details: promptDetails,
    cost_details: {
      upstream_inference_cost: null,
      upstream_inference_prompt_cost: bill.promptCostUsd,
      upstream_inference_completions_cost: bill.completionsCostUsd,
    },
    completion_tokens_details: completionDetails,
    ...toolUse,
  };
}
