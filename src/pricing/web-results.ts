/**
 * What one web search result costs. OpenRouter's web plugin (and a `:online` model id)
 * fetches results from its own engine (Exa) unless the model searches natively, and bills
 * them at $4 per 1,000 results (OpenRouter's web search pricing), whatever the model
 * costs: also on `:free` models, and on models whose listing shows `web_search` as 0 or
 * leaves it out. A positive `web_search` in the listing is the model's own (native) price.
 */
import type { ModelPrice } from "./model-price";

/** OpenRouter's web search pricing: $4 per 1,000 results from its engine. WEB_SEARCH_RESULT_USD overrides it. */
export const DEFAULT_WEB_RESULT_USD = 0.004;

/** Nano-dollars per result of DEFAULT_WEB_RESULT_USD. */
export const DEFAULT_WEB_RESULT_NANO = 4_000_000;

/**
 * Nano-dollars per web result on this model: its listed `web_search` price when positive,
 * else the engine's. Never 0, so a search is never reserved as free.
 */
export function webResultPrice(model: ModelPrice, engineResultNano: number): number {
  return model.webSearch > 0 ? model.webSearch : engineResultNano;
}
