/**
 * A catalogue for spend-cap tests: one model per way OpenRouter bills beyond prompt and
 * completion tokens (PublicPricing: request, image, web_search, internal_reasoning,
 * input_cache_*), plus fallbacks, multi-provider pricing and a "-1" router, and models that
 * are billed for what their listing does not show: web results from OpenRouter's engine on a
 * `:free` model and on models listing web_search as 0 or not at all, and an Anthropic model's
 * tool-use prompt. Magnitudes are realistic: they follow real models' published prices.
 */
import { DEFAULT_SUPPORTED_PARAMETERS, type MockModel } from "./models";

const REASONING_PARAMETERS = [...DEFAULT_SUPPORTED_PARAMETERS, "reasoning", "include_reasoning"];

export const BILLING_MODELS: readonly MockModel[] = Object.freeze([
  {
    id: "bill/fee",
    name: "Bill: Per-request fee",
    pricing: { prompt: "0.000001", completion: "0.000002", request: "0.002" },
    contextLength: 128000,
    maxCompletionTokens: 16384,
  },
  {
    id: "bill/vision",
    name: "Bill: Vision",
    // GPT-4o's token prices; OpenRouter lists images for such models at about this much each.
    pricing: { prompt: "0.0000025", completion: "0.00001", image: "0.003613" },
    contextLength: 128000,
    maxCompletionTokens: 16384,
  },
  {
    id: "bill/search",
    name: "Bill: Web search",
    // OpenRouter's web plugin: $4 per 1000 results.
    pricing: { prompt: "0.000001", completion: "0.000002", web_search: "0.004" },
    // Small, so that a web search (whose results make the prompt bound the context length) fits a $0.05 cap.
    contextLength: 16384,
    maxCompletionTokens: 16384,
  },
  {
    id: "bill/cache",
    name: "Bill: Prompt caching",
    // Claude 3.5 Sonnet's prices: cache reads at 0.1×, cache writes at 1.25× the prompt price.
    pricing: { prompt: "0.000003", completion: "0.000015", input_cache_read: "0.0000003", input_cache_write: "0.00000375" },
    contextLength: 128000,
    maxCompletionTokens: 16384,
  },
  {
    id: "bill/reasoner",
    name: "Bill: Reasoner",
    // o3-mini's token prices, with reasoning dearer than the answer.
    pricing: { prompt: "0.0000011", completion: "0.0000044", internal_reasoning: "0.000009" },
    contextLength: 128000,
    maxCompletionTokens: 16384,
    reasons: true,
    supportedParameters: REASONING_PARAMETERS,
  },
  {
    id: "bill/cheap",
    name: "Bill: Cheap",
    pricing: { prompt: "0.0000001", completion: "0.0000004" },
    contextLength: 128000,
    maxCompletionTokens: 16384,
  },
  {
    id: "bill/pricey",
    name: "Bill: Pricey",
    pricing: { prompt: "0.000015", completion: "0.00006" },
    contextLength: 128000,
    maxCompletionTokens: 16384,
  },
  {
    id: "bill/multi",
    name: "Bill: Multi-provider",
    pricing: { prompt: "0.000001", completion: "0.000004" },
    contextLength: 128000,
    maxCompletionTokens: 16384,
    providers: [
      { name: "Listed", priceMultiplier: 1 },
      { name: "Triple", priceMultiplier: 3 },
    ],
  },
  {
    id: "bill/o1-pro",
    name: "Bill: o1-pro",
    // $150 / $600 per million tokens.
    pricing: { prompt: "0.00015", completion: "0.0006" },
    contextLength: 200000,
    maxCompletionTokens: 16384,
  },
  {
    id: "bill/llama:free",
    name: "Bill: Free (a :free id)",
    // Listed free with web_search "0", as OpenRouter lists its :free models; web results are still billed.
    pricing: { prompt: "0", completion: "0" },
    contextLength: 16384,
    maxCompletionTokens: 4096,
  },
  {
    id: "bill/unpriced-search",
    name: "Bill: No web_search price listed",
    // Llama 3.1 8B's prices; the listing leaves web_search out altogether.
    pricing: { prompt: "0.00000002", completion: "0.00000005" },
    contextLength: 16384,
    maxCompletionTokens: 4096,
    unlistedPrices: ["web_search"],
  },
  {
    id: "anthropic/claude-opus-4",
    name: "Bill: Anthropic Opus-priced",
    // Claude Opus 4's prices, $15/$75 per million tokens; an anthropic/ id, so tools add its tool-use prompt.
    pricing: { prompt: "0.000015", completion: "0.000075" },
    contextLength: 200000,
    maxCompletionTokens: 32000,
    tokenizer: "Claude",
  },
  {
    id: "bill/auto",
    name: "Bill: Auto router",
    // Like openrouter/auto: "-1" means the price is the routed model's.
    pricing: { prompt: "-1", completion: "-1" },
    contextLength: 128000,
    maxCompletionTokens: 16384,
    routesTo: ["bill/o1-pro", "bill/cheap"],
  },
]);
