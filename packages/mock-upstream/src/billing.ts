/**
 * What a served generation costs, billed the way OpenRouter documents its prices
 * (components.schemas.PublicPricing): tokens at `prompt` and `completion`, a `request` fee,
 * `image` per input image, `web_search` per search result, `internal_reasoning` per reasoning
 * token and `input_cache_write` per prompt token written to the cache. Every price is the
 * serving provider's: the listed one times its multiplier (and a premium tier's). Beyond the
 * listing: web results from OpenRouter's own engine, and a provider's tool-use prompt.
 */
import type { ToolUse } from "./chat-request";
import type { MockModel } from "./models";

/**
 * OpenRouter's web search pricing: results from its own engine (Exa) cost $4 per 1,000,
 * on models whose listing prices no web_search (0 or absent), `:free` ones included. It is
 * OpenRouter's fee, not the provider's: no provider or tier multiplier applies.
 */
export const ENGINE_RESULT_USD = 0.004;

/**
 * Anthropic's tool use pricing page: with `tools`, its models add a tool-use system prompt of
 * 346 tokens, 313 when `tool_choice` forces a tool (Claude Opus 4 and the other current models).
 */
const ANTHROPIC_TOOL_PROMPT = { choosing: 346, forced: 313 } as const;

/** Prompt tokens the serving model's provider adds to a request with tools: only the Anthropic family here. */
export function toolPromptTokens(model: MockModel, tools: ToolUse): number {
  if (tools === "none" || !model.id.startsWith("anthropic/")) return 0;
  return ANTHROPIC_TOOL_PROMPT[tools];
}

/**
 * What the mock bills premium tiers at, as multipliers of the serving provider's prices.
 * `priority` (and its alias `fast`): OpenAI's priority processing, up to 2× its standard
 * prices (GPT-5's). `auto` lets the provider pick, and it may pick priority: billed so.
 * `scale` likewise. `default` and `flex` bill the listed prices (flex may be served on the
 * standard tier, billed at its rate). Tests configure the proxy with at least these.
 */
export const MOCK_TIER_MULTIPLIERS: Readonly<Record<string, number>> = { auto: 2, default: 1, flex: 1, priority: 2, fast: 2, scale: 2 };

/** `speed: "fast"`: Anthropic's fast mode, billed at 6× the standard prices (Claude Opus 4.6's fast-mode prices). */
export const MOCK_FAST_SPEED_MULTIPLIER = 6;

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

/** Prompt tokens of a request: its text, plus what each image and each web result adds, plus a provider's tool-use prompt. */
export function totalPromptTokens(
  textTokens: number,
  images: number,
  imageTokens: number,
  webResults: number,
  resultTokens: number,
  toolTokens: number,
): number {
  return textTokens + images * imageTokens + webResults * resultTokens + toolTokens;
}

export function billFor(model: MockModel, multiplier: number, work: BilledWork): Bill {
  const price = (value: string | undefined) => Number(value ?? "0") * multiplier;
  const pricing = model.pricing;
  const resultPrice = Number(pricing.web_search ?? "0") > 0 ? price(pricing.web_search) : ENGINE_RESULT_USD;
  // Anthropic-style caching: with a breakpoint, the whole prompt is written at the cache-write rate.
  const cacheWriteTokens = work.cacheWrite && pricing.input_cache_write !== undefined ? work.promptTokens : 0;
  const promptSide =
    (work.promptTokens - cacheWriteTokens) * price(pricing.prompt) +
    cacheWriteTokens * price(pricing.input_cache_write) +
    price(pricing.request) +
    work.images * price(pricing.image) +
    work.webResults * resultPrice;
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
