/**
 * GET /generation?id= of the mock upstream (spec/openrouter-openapi.yaml, paths./generation):
 * a generation's record in the spec's GenerationResponse shape, what the upstream billed for
 * it in the end (`total_cost`, and `usage` the same). 401 without a key the mock takes
 * (./bearer.ts); 404 (the spec's NotFoundResponse) for an id it never served, a request
 * that failed before any generation, and a record that has not appeared yet
 * (./generation-log.ts).
 */
import { authenticate } from "./bearer";
import { errorBody } from "./errors";
import type { GenerationLog, GenerationRecord } from "./generation-log";
import type { KeyBook } from "./keys";

const JSON_HEADERS = { "content-type": "application/json" };

export function handleGenerationLookup(request: Request, log: GenerationLog, keys: KeyBook, now: number): Response {
  const caller = authenticate(request, keys, now);
  if (!("account" in caller)) return answerError(401, caller.message);
  const id = new URL(request.url).searchParams.get("id");
  if (!id) return answerError(400, "Missing required query parameter: id");
  const record = log.visible(id, now);
  if (!record) return answerError(404, `Generation ${id} not found`);
  return new Response(JSON.stringify({ data: generationData(record) }), { headers: JSON_HEADERS });
}

function answerError(status: number, message?: string): Response {
  return new Response(errorBody(status, message), { status, headers: JSON_HEADERS });
}

/** Like OpenRouter's own timestamps: ISO 8601 with an explicit UTC offset. */
function timestamp(ms: number): string {
  return new Date(ms).toISOString().replace("Z", "+00:00");
}

/**
 * Every field the spec requires, in its order. The mock has one tokenizer, so the native
 * counts equal the normalized ones; what it does not model (apps, presets, caches, BYOK,
 * moderation, upstream ids, service tiers) is null or 0 as the spec allows.
 */
function generationData(record: GenerationRecord) {
  const latency = record.endedAt - record.createdAt;
  return {
    id: record.id,
    upstream_id: null,
    total_cost: record.costUsd,
    cache_discount: null,
    upstream_inference_cost: null,
    created_at: timestamp(record.createdAt),
    model: record.model,
    app_id: null,
    streamed: record.streamed,
    cancelled: record.cancelled,
    provider_name: record.provider,
    latency,
    moderation_latency: null,
    generation_time: latency,
    finish_reason: record.finishReason,
    service_tier: null,
    tokens_prompt: record.promptTokens,
    tokens_completion: record.completionTokens,
    native_tokens_prompt: record.promptTokens,
    native_tokens_completion: record.completionTokens,
    native_tokens_completion_images: 0,
    native_tokens_reasoning: record.reasoningTokens,
    native_tokens_cached: 0,
    num_media_prompt: record.images,
    num_input_audio_prompt: 0,
    num_media_completion: 0,
    num_search_results: record.webResults,
    num_fetches: 0,
    // OpenRouter's web search docs: Exa serves the web plugin for models without native search.
    web_search_engine: record.webResults > 0 ? "exa" : null,
    origin: record.httpReferer ?? "",
    usage: record.costUsd,
    is_byok: false,
    native_finish_reason: record.finishReason,
    external_user: record.externalUser,
    api_type: "completions",
    preset_id: null,
    router: record.router,
    provider_responses: null,
    user_agent: record.userAgent,
    http_referer: record.httpReferer,
    data_region: "global",
    workspace_id: null,
  };
}
