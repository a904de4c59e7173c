/**
 * The parts of a ChatRequest (spec/openrouter-openapi.yaml, components.schemas.ChatRequest)
 * that decide who serves it and what it costs: the candidate models, `provider.max_price`,
 * images, the web plugin, `cache_control`, the reasoning settings, `tools`, the service tier
 * and `speed`. Malformed values throw BadRequest, which the handler answers with a 400
 * (OpenRouter validates its schema too).
 */
import { MOCK_FAST_SPEED_MULTIPLIER, MOCK_TIER_MULTIPLIERS } from "./billing";

export class BadRequest extends Error {}

/** provider.max_price as numbers: prompt and completion in USD per million tokens, request and image in USD. */
export interface MaxPrice {
  prompt?: number;
  completion?: number;
  request?: number;
  image?: number;
}

/** What the request asks of the reasoning of a reasoning model. */
export interface ReasoningRequest {
  /** `reasoning.enabled: false`, or effort "none": no reasoning at all. */
  off: boolean;
  /** `reasoning.max_tokens`, the only limit on reasoning; null when absent. */
  cap: number | null;
  /** `reasoning.exclude` or `include_reasoning: false`: reasoning happens (and is billed) but is not returned. */
  hidden: boolean;
}

const ONLINE_SUFFIX = ":online";
/** WebSearchPlugin.max_results when the request does not say (OpenRouter's documented default). */
const DEFAULT_WEB_RESULTS = 5;

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/**
 * `model`, then `models` (ChatRequest.models: fallbacks, in order), without duplicates.
 * `model` may be left out when `models` is a non-empty array. Empty: no model given.
 */
export function candidateModels(body: Json): string[] {
  const candidates: string[] = [];
  if (body.model !== undefined && body.model !== null) {
    if (typeof body.model !== "string" || body.model === "") return [];
    candidates.push(body.model);
  }
  if (body.models !== undefined && body.models !== null) {
    if (!Array.isArray(body.models) || body.models.some((id) => typeof id !== "string" || id === "")) {
      throw new BadRequest("models must be an array of model IDs");
    }
    for (const id of body.models as string[]) if (!candidates.includes(id)) candidates.push(id);
  }
  return candidates;
}

/** A `:online` model id asks for web search (OpenRouter's shortcut for the web plugin). */
export function splitOnline(id: string): { id: string; online: boolean } {
  return id.endsWith(ONLINE_SUFFIX) ? { id: id.slice(0, -ONLINE_SUFFIX.length), online: true } : { id, online: false };
}

/** ProviderPreferences.max_price; numbers or decimal strings both arrive in practice. Null when absent. */
export function readMaxPrice(body: Json): MaxPrice | null {
  const provider = body.provider;
  if (provider === undefined || provider === null) return null;
  if (!isObject(provider)) throw new BadRequest("provider must be an object");
  const max = provider.max_price;
  if (max === undefined || max === null) return null;
  if (!isObject(max)) throw new BadRequest("provider.max_price must be an object");
  const out: MaxPrice = {};
  for (const key of ["prompt", "completion", "request", "image"] as const) {
    const raw = max[key];
    if (raw === undefined || raw === null) continue;
    const value = typeof raw === "number" ? raw : typeof raw === "string" && raw.trim() !== "" ? Number(raw) : NaN;
    if (!Number.isFinite(value) || value < 0) throw new BadRequest(`provider.max_price.${key} must be a non-negative number`);
    out[key] = value;
  }
  return out;
}

/** Content parts `{ type: "image_url" }` in all messages (ChatContentItems): each is one input image. */
export function countImages(messages: readonly unknown[]): number {
  let images = 0;
  for (const message of messages) {
    const content = isObject(message) ? message.content : undefined;
    if (!Array.isArray(content)) continue;
    for (const part of content) if (isObject(part) && part.type === "image_url") images++;
  }
  return images;
}

/**
 * Web search results the request buys (WebSearchPlugin, `max_results`, default 5). `enabled:
 * false` turns search off, also for a `:online` model. Null: no web plugin in the request.
 */
function webPluginResults(body: Json): number | null {
  const plugins = Array.isArray(body.plugins) ? body.plugins : [];
  const plugin = plugins.find((p): p is Json => isObject(p) && p.id === "web");
  if (!plugin) return null;
  if (plugin.enabled === false) return 0;
  const max = plugin.max_results;
  if (max === undefined || max === null) return DEFAULT_WEB_RESULTS;
  if (!Number.isSafeInteger(max) || (max as number) < 1) throw new BadRequest("plugins[web].max_results must be a positive integer");
  return max as number;
}

/** Web results for the served candidate: the plugin decides, else a `:online` id means the default search. */
export function webResultsFor(request: BillableRequest, online: boolean): number {
  return request.webPluginResults ?? (online ? DEFAULT_WEB_RESULTS : 0);
}

/** A `cache_control` breakpoint on the request, a message or a content part (Anthropic-style caching). */
export function asksForCacheWrite(body: Json, messages: readonly unknown[]): boolean {
  const marked = (value: unknown) => isObject(value) && value.cache_control !== undefined && value.cache_control !== null;
  if (marked(body)) return true;
  for (const message of messages) {
    if (marked(message)) return true;
    const content = isObject(message) ? message.content : undefined;
    if (Array.isArray(content) && content.some(marked)) return true;
  }
  return false;
}

/** ChatRequest.reasoning (ReasoningConfig), `reasoning_effort` and `include_reasoning`. */
export function readReasoning(body: Json): ReasoningRequest {
  const reasoning = body.reasoning;
  const request: ReasoningRequest = { off: body.reasoning_effort === "none", cap: null, hidden: body.include_reasoning === false };
  if (reasoning === undefined || reasoning === null) return request;
  if (!isObject(reasoning)) throw new BadRequest("reasoning must be an object");
  if (reasoning.enabled === false || reasoning.effort === "none") request.off = true;
  if (reasoning.exclude === true) request.hidden = true;
  const cap = reasoning.max_tokens;
  if (cap !== undefined && cap !== null) {
    if (!Number.isSafeInteger(cap) || (cap as number) < 0) throw new BadRequest("reasoning.max_tokens must be a non-negative integer");
    request.cap = cap as number;
  }
  return request;
}

/** `tools` sent, and whether `tool_choice` forces a tool (`required`, or a named function). */
export type ToolUse = "none" | "choosing" | "forced";

function toolUse(body: Json): ToolUse {
  if (!Array.isArray(body.tools) || body.tools.length === 0) return "none";
  const choice = body.tool_choice;
  return choice === "required" || (isObject(choice) && choice.type === "function") ? "forced" : "choosing";
}

/** ChatRequest.service_tier's values (`fast` is its alias for `priority`). */
const SERVICE_TIERS = new Set(Object.keys(MOCK_TIER_MULTIPLIERS));

/** The premium the request is billed at: its service tier's multiplier times its speed's. */
function tierMultiplier(body: Json): number {
  const tier = body.service_tier;
  if (tier !== undefined && tier !== null && (typeof tier !== "string" || !SERVICE_TIERS.has(tier))) {
    throw new BadRequest(`service_tier must be one of ${[...SERVICE_TIERS].join(", ")}`);
  }
  const speed = body.speed;
  if (speed !== undefined && speed !== null && speed !== "fast" && speed !== "standard") throw new BadRequest("speed must be fast or standard");
  return (typeof tier === "string" ? MOCK_TIER_MULTIPLIERS[tier]! : 1) * (speed === "fast" ? MOCK_FAST_SPEED_MULTIPLIER : 1);
}

/**
 * max_price holds at the price of the tier served: a premium tier's endpoints are priced at
 * its rate, so each limit admits a standard price that much lower.
 */
function atTier(max: MaxPrice | null, multiplier: number): MaxPrice | null {
  if (max === null || multiplier === 1) return max;
  const out: MaxPrice = {};
  for (const [key, value] of Object.entries(max) as Array<[keyof MaxPrice, number]>) out[key] = value / multiplier;
  return out;
}

/** Everything in the request, besides the models, that changes what serves it and what it costs. */
export interface BillableRequest {
  /** provider.max_price in the standard tier's terms (see atTier), as routing compares listed prices with it. */
  maxPrice: MaxPrice | null;
  images: number;
  webPluginResults: number | null;
  cacheWrite: boolean;
  reasoning: ReasoningRequest;
  tools: ToolUse;
  /** The service tier's and speed's premium: every price of the provider times this. */
  tierMultiplier: number;
}

/** Throws BadRequest on a malformed field. */
export function readBillableRequest(body: Json, messages: readonly unknown[]): BillableRequest {
  const tier = tierMultiplier(body);
  return {
    maxPrice: atTier(readMaxPrice(body), tier),
    images: countImages(messages),
    webPluginResults: webPluginResults(body),
    cacheWrite: asksForCacheWrite(body, messages),
    reasoning: readReasoning(body),
    tools: toolUse(body),
    tierMultiplier: tier,
  };
}
