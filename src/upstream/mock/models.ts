/**
 * The mock's model catalogue and its GET /models body, in the shape of the spec's
 * `ModelsListResponse` (shared/spec/openrouter-openapi.yaml, components.schemas.Model):
 * prices are decimal strings in USD per token, as OpenRouter publishes them.
 */

export interface MockModel {
  id: string;
  name: string;
  /** USD per token, decimal strings (e.g. "0.00000015"). */
  pricing: { prompt: string; completion: string };
  contextLength: number;
  /** `top_provider.max_completion_tokens`; null when the provider states none. */
  maxCompletionTokens: number | null;
  /** The spec's tokenizer family (`ModelGroup`). */
  tokenizer?: string;
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

const SUPPORTED_PARAMETERS = [
  "max_tokens", "temperature", "top_p", "stop", "frequency_penalty", "presence_penalty", "seed",
  "response_format", "tools", "tool_choice",
];

function modelEntry(model: MockModel) {
  return {
    id: model.id,
    canonical_slug: model.id,
    hugging_face_id: null,
    name: model.name,
    created: CREATED,
    description: `${model.name}, served by the mock upstream.`,
    context_length: model.contextLength,
    architecture: {
      modality: "text->text",
      input_modalities: ["text"],
      output_modalities: ["text"],
      tokenizer: model.tokenizer ?? "Other",
      instruct_type: null,
    },
    pricing: {
      prompt: model.pricing.prompt,
      completion: model.pricing.completion,
      request: "0",
      image: "0",
      web_search: "0",
      internal_reasoning: "0",
    },
    top_provider: {
      context_length: model.contextLength,
      max_completion_tokens: model.maxCompletionTokens,
      is_moderated: false,
    },
    per_request_limits: null,
    supported_parameters: SUPPORTED_PARAMETERS,
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

/** USD per token as numbers, for costing a completion. */
export function numericPrices(model: MockModel): { prompt: number; completion: number } {
  return { prompt: Number(model.pricing.prompt), completion: Number(model.pricing.completion) };
}
