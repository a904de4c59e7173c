/**
 * What a chat request can be billed for, read from its body before anything is priced
 * (ARCHITECTURE.md §3 "The hard cap": the worst case covers every dimension the upstream
 * bills). Field names follow the shared spec's ChatRequest; what cannot be bounded is
 * refused here with 400, naming what and why, unless the operator set a reservation for it.
 */
import { ApiError } from "../errors";

/** OpenRouter's web plugin returns 5 results unless `max_results` says otherwise. */
export const DEFAULT_WEB_RESULTS = 5;

/** Plugins that cost nothing beyond the tokens they change (spec: ChatRequest.plugins). */
const FREE_PLUGINS = new Set(["response-healing", "context-compression"]);

/** PDF engines billed as tokens or not at all; `mistral-ocr` is billed per page (unbounded). */
const TOKEN_BILLED_PDF_ENGINES = new Set(["pdf-text", "native"]);

export type ReasoningAsk =
  /** Nothing said about reasoning: the model's default. */
  | { kind: "unset" }
  /** `reasoning.enabled: false`, or effort "none", with no budget or other effort beside it. */
  | { kind: "off" }
  | { kind: "tokens"; maxTokens: number }
  | { kind: "effort"; effort: string }
  /** `reasoning: {enabled: true}` (or `include_reasoning`) without a size. */
  | { kind: "on" };

export interface RequestShape {
  /** `model` then each of `models` (the fallbacks), without duplicates. */
  modelIds: string[];
  images: number;
  /** Bytes of the image URLs (mostly base64 data): images are bounded per image, not per byte. */
  imageUrlBytes: number;
  /** Audio, video or file parts: their tokens cannot be read from their size. */
  opaqueMedia: boolean;
  audioInput: boolean;
  fileParts: boolean;
  /** The engine of a `file-parser` plugin, if one was given. */
  pdfEngine: string | null;
  /** Web search results from `plugins` (`:online` ids are counted where models are resolved). */
  webResults: number;
  /** `tools` were sent: providers may add a tool-use system prompt the body does not hold (./tool-prompt.ts). */
  tools: boolean;
  /** `n` (or `best_of`): completions per request. */
  choices: number;
  /** Bytes of `prediction.content`: rejected prediction tokens are billed as completion tokens. */
  predictionBytes: number;
  reasoning: ReasoningAsk;
  audioOutput: boolean;
  imageOutput: boolean;
  /** Plugins and server tools the operator allows, at their configured per-call reservation. */
  operatorReservedNano: number;
}

/** Per-call reservations the operator configured for plugins and server tools, by id or type. */
export type OperatorReservations = ReadonlyMap<string, number>;

export function readRequestShape(body: Record<string, unknown>, allowed: OperatorReservations): RequestShape {
  const shape: RequestShape = {
    modelIds: modelIdsOf(body),
    images: 0,
    imageUrlBytes: 0,
    opaqueMedia: false,
    audioInput: false,
    fileParts: false,
    pdfEngine: null,
    webResults: 0,
    tools: Array.isArray(body.tools) && body.tools.length > 0,
    choices: Math.max(choiceCount(body, "n"), choiceCount(body, "best_of")),
    predictionBytes: predictionBytes(body.prediction),
    reasoning: reasoningAsk(body),
    audioOutput: includes(body.modalities, "audio"),
    imageOutput: includes(body.modalities, "image"),
    operatorReservedNano: 0,
  };
  for (const message of Array.isArray(body.messages) ? body.messages : []) readContent((message as { content?: unknown })?.content, shape);
  readPlugins(body.plugins, shape, allowed);
  readServerTools(body.tools, shape, allowed);
  return shape;
}

function modelIdsOf(body: Record<string, unknown>): string[] {
  const ids: string[] = [];
  if (typeof body.model === "string" && body.model !== "") ids.push(body.model);
  if (body.models !== undefined) {
    if (!Array.isArray(body.models) || body.models.some((m) => typeof m !== "string" || m === "")) {
      throw new ApiError("invalid_request", "models must be an array of model ids");
    }
    for (const id of body.models as string[]) if (!ids.includes(id)) ids.push(id);
  }
  if (ids.length === 0) throw new ApiError("invalid_request", "a model is required: send model, or models (fallbacks)");
  return ids;
}

function readContent(content: unknown, shape: RequestShape): void {
  if (!Array.isArray(content)) return;
  for (const part of content) {
    const type = (part as { type?: unknown } | null)?.type;
    if (type === "image_url") {
      shape.images++;
      const url = (part as { image_url?: { url?: unknown } }).image_url?.url;
      if (typeof url === "string") shape.imageUrlBytes += Buffer.byteLength(url);
    } else if (type === "input_audio") {
      shape.audioInput = true;
      shape.opaqueMedia = true;
    } else if (type === "file") {
      shape.fileParts = true;
      shape.opaqueMedia = true;
    } else if (type !== "text") {
      // video_url, input_video and any part type added later: tokens unknown from size.
      shape.opaqueMedia = true;
    }
  }
}

function readPlugins(plugins: unknown, shape: RequestShape, allowed: OperatorReservations): void {
  if (plugins === undefined) return;
  if (!Array.isArray(plugins)) throw new ApiError("invalid_request", "plugins must be an array");
  for (const plugin of plugins as Array<Record<string, unknown>>) {
    const id = plugin?.id;
    if (typeof id !== "string") throw new ApiError("invalid_request", "every plugin needs an id");
    if (plugin.enabled === false || FREE_PLUGINS.has(id)) continue;
    if (id === "web") {
      const results = positiveIntOr(plugin.max_results, DEFAULT_WEB_RESULTS, "plugins[web].max_results");
      const uses = positiveIntOr(plugin.max_uses, 1, "plugins[web].max_uses");
      shape.webResults += results * uses;
    } else if (id === "file-parser" && TOKEN_BILLED_PDF_ENGINES.has(pdfEngineOf(plugin))) {
      shape.pdfEngine = pdfEngineOf(plugin);
    } else if (allowed.has(id)) {
      shape.operatorReservedNano += allowed.get(id)!;
      if (id === "file-parser") shape.pdfEngine = "operator";
    } else {
      throw new ApiError(
        "invalid_request",
        `plugin "${id}" is refused: its cost cannot be bounded before the call, so it could pass the budget's cap ` +
          `(an operator can allow it with a per-call reservation in PLUGIN_RESERVATIONS_USD)`,
      );
    }
  }
}

/** OpenRouter server tools (`openrouter:*`, `web_search_preview`) run an agent loop billed per step. */
function readServerTools(tools: unknown, shape: RequestShape, allowed: OperatorReservations): void {
  if (!Array.isArray(tools)) return;
  for (const tool of tools as Array<{ type?: unknown }>) {
    const type = tool?.type;
    if (type === "function" || type === undefined) continue;
    const name = String(type);
    if (allowed.has(name)) shape.operatorReservedNano += allowed.get(name)!;
    else {
      throw new ApiError(
        "invalid_request",
        `server tool "${name}" is refused: it runs server-side steps whose cost cannot be bounded before the call ` +
          `(an operator can allow it with a per-call reservation in PLUGIN_RESERVATIONS_USD)`,
      );
    }
  }
}

function pdfEngineOf(plugin: Record<string, unknown>): string {
  return String((plugin.pdf as { engine?: unknown } | undefined)?.engine);
}

/**
 * What the body asks of reasoning, read as one consistent ask. Fields that contradict each
 * other (`reasoning_effort: "none"` beside `reasoning.max_tokens`, `enabled: false` beside an
 * effort) resolve to the ask that can be bounded: a budget, else an effort (which becomes a
 * budget), and only then the off switch. The body sent upstream carries that ask alone
 * (src/services/upstream-body.ts), so what is reserved is what the upstream is told.
 */
function reasoningAsk(body: Record<string, unknown>): ReasoningAsk {
  const reasoning = body.reasoning as { enabled?: unknown; effort?: unknown; max_tokens?: unknown } | undefined | null;
  const shorthand = body.reasoning_effort;
  if (reasoning?.max_tokens !== undefined && reasoning.max_tokens !== null) {
    return { kind: "tokens", maxTokens: positiveIntOr(reasoning.max_tokens, 0, "reasoning.max_tokens") };
  }
  const effort = [reasoning?.effort, shorthand].find((e): e is string => typeof e === "string" && e !== "none");
  if (effort !== undefined) return { kind: "effort", effort };
  if (reasoning?.enabled === false || reasoning?.effort === "none" || shorthand === "none") return { kind: "off" };
  if ((reasoning && typeof reasoning === "object") || body.include_reasoning === true) return { kind: "on" };
  return { kind: "unset" };
}

/** The request asks for reasoning (a budget, an effort, or reasoning switched on), whatever its model's entry says. */
export function asksForReasoning(ask: ReasoningAsk): boolean {
  return ask.kind === "tokens" || ask.kind === "effort" || ask.kind === "on";
}

function choiceCount(body: Record<string, unknown>, field: "n" | "best_of"): number {
  const value = body[field];
  if (value === undefined || value === null) return 1;
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > 128) {
    throw new ApiError("invalid_request", `${field} must be an integer from 1 to 128`);
  }
  return value as number;
}

function predictionBytes(prediction: unknown): number {
  const content = (prediction as { content?: unknown } | null)?.content;
  if (content === undefined || content === null) return 0;
  return Buffer.byteLength(typeof content === "string" ? content : JSON.stringify(content));
}

function positiveIntOr(value: unknown, fallback: number, name: string): number {
  if (value === undefined || value === null) return fallback;
  if (!Number.isSafeInteger(value) || (value as number) < 1) throw new ApiError("invalid_request", `${name} must be a positive integer`);
  return value as number;
}

function includes(list: unknown, item: string): boolean {
  return Array.isArray(list) && list.includes(item);
}
