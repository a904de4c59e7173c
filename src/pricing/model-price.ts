/**
 * Every price the upstream bills a model by, read from one `GET /models` entry
 * (shared spec: components.schemas.PublicPricing). Prices are decimal strings in USD per
 * unit; here they become nano-dollars per unit (fractional: $0.0375/M tokens = 37.5 nano
 * per token). A price of "-1" marks a variable-priced router (openrouter/auto).
 */

export interface ModelPrice {
  id: string;
  /** Per prompt token. */
  prompt: number;
  /** Per completion token. */
  completion: number;
  /** Per request (a flat fee per generation). */
  request: number;
  /** Per input image. */
  image: number;
  /** Per web search result (OpenRouter's web plugin bills results). */
  webSearch: number;
  /** Per reasoning token, when priced apart from completion tokens; else 0. */
  internalReasoning: number;
  /** Per cache-write token: the higher of the 5-minute and 1-hour rates; else 0. */
  cacheWrite: number;
  /** Per audio input token; else 0. */
  audio: number;
  /** Per audio output token; else 0. */
  audioOutput: number;
  /** Per image token on the input side; else 0. */
  imageToken: number;
  /** Per generated image; else 0. */
  imageOutput: number;
  /** True when the prompt or completion price is "-1": a router, priced by where it sends the call. */
  variable: boolean;
  /** Other `pricing` keys priced "-1" (variable): a request that uses one cannot be bounded. */
  variableKeys: string[];
  contextLength: number;
  /** The most completion tokens the model (its top provider) will produce. */
  maxCompletionTokens: number;
  /** The model can produce reasoning tokens (supported_parameters, or a reasoning price). */
  reasons: boolean;
  /** Input modalities, e.g. ["text","image","file"]: "file" means PDFs are read natively. */
  inputModalities: string[];
  /** False when the fallback price stands in for a model the catalogue does not list. */
  listed: boolean;
}

/** The `pricing` keys read here, and where each lands. `input_cache_write_1h` folds into cacheWrite. */
const PRICE_KEYS = {
  prompt: "prompt",
  completion: "completion",
  request: "request",
  image: "image",
  web_search: "webSearch",
  internal_reasoning: "internalReasoning",
  input_cache_write: "cacheWrite",
  input_cache_write_1h: "cacheWrite",
  audio: "audio",
  audio_output: "audioOutput",
  image_token: "imageToken",
  image_output: "imageOutput",
} as const;

type PriceField = (typeof PRICE_KEYS)[keyof typeof PRICE_KEYS];

/** Every billed dimension at zero: what a model costs where its sheet names no price. */
const NO_PRICES: Readonly<Record<PriceField, number>> = {
  prompt: 0,
  completion: 0,
  request: 0,
  image: 0,
  webSearch: 0,
  internalReasoning: 0,
  cacheWrite: 0,
  audio: 0,
  audioOutput: 0,
  imageToken: 0,
  imageOutput: 0,
};

export interface CatalogueEntry {
  id?: unknown;
  context_length?: unknown;
  pricing?: Record<string, unknown> & { overrides?: unknown };
  top_provider?: { max_completion_tokens?: unknown; context_length?: unknown } | null;
  supported_parameters?: unknown;
  architecture?: { input_modalities?: unknown } | null;
}

/**
 * Parses one catalogue entry; null when it has no id or no readable prompt/completion
 * price. Conditional overrides (long-context or time-window prices) are folded in by
 * taking, per key, the highest price that could apply: a reservation must cover them all.
 */
export function parseModelPrice(entry: CatalogueEntry): ModelPrice | null {
  if (typeof entry.id !== "string" || !entry.pricing) return null;
  const prices: Record<PriceField, number> = { ...NO_PRICES };
  const variableKeys = new Set<string>();
  const sheets = [entry.pricing, ...(Array.isArray(entry.pricing.overrides) ? entry.pricing.overrides : [])];
  for (const sheet of sheets) {
    if (!sheet || typeof sheet !== "object") continue;
    for (const [key, field] of Object.entries(PRICE_KEYS)) {
      const raw = (sheet as Record<string, unknown>)[key];
      if (raw === undefined || raw === null) continue;
      const usd = Number(raw);
      if (!Number.isFinite(usd)) return null;
      if (usd < 0) variableKeys.add(key);
      else prices[field] = Math.max(prices[field], usd * 1e9);
    }
  }
  if (!isPrice(entry.pricing.prompt) || !isPrice(entry.pricing.completion)) return null;
  const contextLength = positiveInt(entry.context_length) ?? positiveInt(entry.top_provider?.context_length) ?? 4096;
  const maxCompletion = positiveInt(entry.top_provider?.max_completion_tokens) ?? contextLength;
  const parameters = Array.isArray(entry.supported_parameters) ? entry.supported_parameters : [];
  const modalities = entry.architecture?.input_modalities;
  const variable = variableKeys.has("prompt") || variableKeys.has("completion");
  return {
    id: entry.id,
    ...prices,
    variable,
    variableKeys: [...variableKeys].filter((key) => key !== "prompt" && key !== "completion"),
    contextLength,
    maxCompletionTokens: Math.min(maxCompletion, contextLength),
    reasons: parameters.includes("reasoning") || parameters.includes("include_reasoning") || prices.internalReasoning > 0,
    inputModalities: Array.isArray(modalities) ? modalities.filter((m): m is string => typeof m === "string") : ["text"],
    listed: true,
  };
}

/**
 * The price used for a model the catalogue does not list (only while it is empty). Nothing
 * says whether such a model reasons, so it is taken to: its reasoning is bounded too.
 */
export function fallbackPrice(id: string, promptUsdPerToken: number, completionUsdPerToken: number, contextTokens: number): ModelPrice {
  return {
    id,
    ...NO_PRICES,
    prompt: promptUsdPerToken * 1e9,
    completion: completionUsdPerToken * 1e9,
    variable: false,
    variableKeys: [],
    contextLength: contextTokens,
    maxCompletionTokens: contextTokens,
    reasons: true,
    inputModalities: ["text"],
    listed: false,
  };
}

function isPrice(v: unknown): boolean {
  return v !== undefined && v !== null && Number.isFinite(Number(v));
}

function positiveInt(v: unknown): number | null {
  return typeof v === "number" && Number.isInteger(v) && v > 0 ? v : null;
}
