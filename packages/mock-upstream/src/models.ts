/**
 * The mock's model catalogue and its GET /models body, in the shape of the spec's
 * `ModelsListResponse` (spec/openrouter-openapi.yaml, components.schemas.Model):
 * prices are decimal strings in USD, as OpenRouter publishes them (components.schemas.PublicPricing).
 */

/** components.schemas.PublicPricing, the part the mock bills. Absent = not charged. */
export interface MockPricing {
  /** USD per prompt token; "-1" for a variable-priced router (like openrouter/auto). */
  prompt: string;
  /** USD per completion token; "-1" for a variable-priced router. */
  completion: string;
  /** USD per request (per served generation). */
  request?: string;
  /** USD per input image. */
  image?: string;
  /** USD per web search result. */
  web_search?: string;
  /** USD per reasoning token; reasoning falls back to `completion` when absent. */
  internal_reasoning?: string;
  /** USD per prompt token read from the cache (published; the mock never has a cache hit). */
  input_cache_read?: string;
  /** USD per prompt token written to the cache. */
  input_cache_write?: string;
}

/** One of several providers serving a model, at the listed prices times `priceMultiplier`. */
export interface MockProvider {
  name: string;
  priceMultiplier: number;
  /**
   * Aborting a stream stops the generation and its bill (OpenRouter's streaming page:
   * "Stream Cancellation" lists the providers that support it). Absent or false: the
   * generation runs to its end and is billed in full, like the providers that do not.
   */
  cancellable?: boolean;
}

export interface MockModel {
  id: string;
  name: string;
  /** USD, decimal strings (e.g. "0.00000015"). */
  pricing: MockPricing;
  contextLength: number;
  /** `top_provider.max_completion_tokens`; null when the provider states none. */
  maxCompletionTokens: number | null;
  /** The spec's tokenizer family (`ModelGroup`). */
  tokenizer?: string;
  /** Published as `supported_parameters`; default DEFAULT_SUPPORTED_PARAMETERS. */
  supportedParameters?: string[];
  /** A reasoning model: it spends reasoning tokens that max_tokens does not limit (see plannedReasoningTokens). */
  reasons?: boolean;
  /** Several providers; without it, one implicit provider "Mock" at the listed prices. */
  providers?: MockProvider[];
  /** A "-1"-priced router only: the models it routes to, in its order of preference. */
  routesTo?: string[];
  /** Extra prices the listing leaves out instead of showing "0", as some OpenRouter listings do (billed as absent). */
  unlistedPrices?: ReadonlyArray<"request" | "image" | "web_search" | "internal_reasoning">;
}

/** Real prices of real models at the time of writing, plus a free one. */
export const DEFAULT_MODELS: readonly MockModel[] = Object.freeze([
  {
    id: "openai/gpt-4o-mini",
    name: "OpenAI: GPT-4o-mini",
    pricing: { prompt: "0.00000015", completion: "0.0000006" },
    contextLength: 128000,
    maxCompletionTokens: 16384,
    tokenizer: "GPT",
  },
  {
    id: "openai/gpt-4o",
    name: "OpenAI: GPT-4o",
    pricing: { prompt: "0.0000025", completion: "0.00001" },
    contextLength: 128000,
    maxCompletionTokens: 16384,
    tokenizer: "GPT",
  },
  {
    id: "anthropic/claude-3.5-sonnet",
    name: "Anthropic: Claude 3.5 Sonnet",
    pricing: { prompt: "0.000003", completion: "0.000015" },
    contextLength: 200000,
    maxCompletionTokens: 8192,
    tokenizer: "Claude",
  },
  {
    id: "meta-llama/llama-3.1-8b-instruct",
    name: "Meta: Llama 3.1 8B Instruct",
    pricing: { prompt: "0.00000002", completion: "0.00000005" },
    contextLength: 131072,
    maxCompletionTokens: 16384,
    tokenizer: "Llama3",
  },
  {
    id: "mock/free",
    name: "Mock: Free",
    pricing: { prompt: "0", completion: "0" },
    contextLength: 32768,
    maxCompletionTokens: 4096,
    tokenizer: "Other",
  },
]);

/** A fixed creation time (2024-07-18T00:00:00Z) keeps the catalogue deterministic. */
const CREATED = 1721260800;

export const DEFAULT_SUPPORTED_PARAMETERS: readonly string[] = [
  "max_tokens",
  "temperature",
  "top_p",
  "stop",
  "frequency_penalty",
  "presence_penalty",
  "seed",
  "response_format",
  "tools",
  "tool_choice",
];

/** PublicPricing as published: the four extra prices default to "0" unless left out; cache prices only when set. */
function publishedPricing(pricing: MockPricing, unlisted: MockModel["unlistedPrices"] = []): Record<string, string> {
  const published: Record<string, string> = {
    prompt: pricing.prompt,
    completion: pricing.completion,
    request: pricing.request ?? "0",
    image: pricing.image ?? "0",
    web_search: pricing.web_search ?? "0",
    internal_reasoning: pricing.internal_reasoning ?? "0",
  };
  if (pricing.input_cache_read !== undefined) published.input_cache_read = pricing.input_cache_read;
  if (pricing.input_cache_write !== undefined) published.input_cache_write = pricing.input_cache_write;
  for (const key of unlisted) delete published[key];
  return published;
}

function modelEntry(model: MockModel) {
  // A model priced per image takes images: say so, as OpenRouter's listing does.
  const vision = model.pricing.image !== undefined;
  return {
    id: model.id,
    canonical_slug: model.id,
    hugging_face_id: null,
    name: model.name,
    created: CREATED,
    description: `${model.name}, served by the mock upstream.`,
    context_length: model.contextLength,
    architecture: {
      modality: vision ? "text+image->text" : "text->text",
      input_modalities: vision ? ["text", "image"] : ["text"],
      output_modalities: ["text"],
      tokenizer: model.tokenizer ?? "Other",
      instruct_type: null,
    },
    pricing: publishedPricing(model.pricing, model.unlistedPrices),
    top_provider: {
      context_length: model.contextLength,
      max_completion_tokens: model.maxCompletionTokens,
      is_moderated: false,
    },
    per_request_limits: null,
    supported_parameters: model.supportedParameters ?? DEFAULT_SUPPORTED_PARAMETERS,
    default_parameters: null,
    supported_voices: null,
    knowledge_cutoff: null,
    expiration_date: null,
    links: { details: `/api/v1/models/${model.id}/endpoints` },
  };
}

/** GET /models body: the whole list in one page, as when neither offset nor limit is given. */
export function modelsListBody(models: readonly MockModel[]): string {
  return JSON.stringify({ data: models.map(modelEntry), total_count: models.length, links: { next: null } });
}

/** A variable-priced router (openrouter/auto publishes "-1"): its price is the routed model's. */
export function isVariableRouter(model: MockModel): boolean {
  return model.pricing.prompt === "-1" || model.pricing.completion === "-1";
}
