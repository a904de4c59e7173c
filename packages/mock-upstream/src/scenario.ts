/**
 * Scenarios steer the mock upstream per request. They travel inside the prompt, as
 * `[[mock key=value flag]]` in the text of the last message, so that any client library
 * (which only lets you set messages) can ask for a stall, an error or a split stream.
 * Several directives in one message merge left to right, over the mock's defaults.
 */

export type UsageShape =
  /** Usage in its own chunk with `choices: []` (OpenAI's `stream_options.include_usage` shape). */
  | "empty_choices"
  /** Usage in its own chunk whose one choice has an empty delta (seen from OpenRouter too). */
  | "empty_choice"
  /** Usage on the chunk that carries `finish_reason` (some providers do this). */
  | "in_finish";

export interface Scenario {
  /** Completion length in tokens (one token = one word) before max_tokens applies. */
  tokens: number;
  /** Content chunks in a stream; default one per token. */
  chunks: number | null;
  /** Pause before the role chunk and before each content chunk. */
  pauseMs: number;
  /** While pausing or stalling, send `: OPENROUTER PROCESSING` comments at this interval. */
  keepaliveMs: number;
  usageShape: UsageShape;
  noCost: boolean;
  noUsage: boolean;
  noDone: boolean;
  /** Answer with this HTTP error status and OpenRouter's error body. */
  status: number | null;
  /** Seconds in the `retry-after` header of a 429. */
  retryAfter: number;
  /** HTTP 200 whose JSON body is `{ error }`. */
  error200: boolean;
  midStreamError: boolean;
  stallBeforeHeaders: boolean;
  /** Streams: stop after `after` content chunks. JSON: stop after half the body. */
  stallMidStream: boolean;
  /** Streams: cut the connection after `after` content chunks. JSON: after half the body. */
  resetMidStream: boolean;
  /** Content chunks sent before a mid-stream error, stall or reset; default half. */
  after: number | null;
  splitFrames: boolean;
  crlf: boolean;
  /** A comment line (not the keep-alive's text) before every data event. */
  comments: boolean;
  /** Every JSON event split over several `data:` lines (WHATWG SSE joins them with LF). */
  multilineData: boolean;
  /** One event whose data is not JSON (a truncated chunk), right after the role chunk. */
  badJson: boolean;
  /** The first content chunk's `data:` line padded to this many bytes (padding is not counted as tokens). */
  bigLine: number | null;
  /** Every content chunk's `data:` line padded to this many bytes: large streams from few tokens. */
  padLines: number | null;
  /** Reasoning tokens of a reasoning model (null: its default, 256); not limited by max_tokens. */
  reasoning: number | null;
  /** Prompt tokens each input image adds. */
  imageTokens: number;
  /** Prompt tokens each web search result adds. */
  resultTokens: number;
  /** The first N candidate models (`model`, then `models`) are unavailable: fallbacks serve. */
  failOver: number;
  /** The messages' prompt tokens instead of the estimate: a denser tokenizer (images and results still add theirs). */
  promptTokens: number | null;
  /** A completion's answer, headers included, comes this many ms after the request (a slow provider). */
  delayMs: number;
  /** Whether aborting the stream stops the generation and its bill; null: the serving provider's `cancellable`. */
  cancellable: boolean | null;
  /** The generation's record appears this long (mock clock) after the generation ends; null: the mock's `generationRecordDelayMs`. */
  recordAfterMs: number | null;
}

export type ScenarioInput = Partial<Scenario>;

export const DEFAULT_SCENARIO: Readonly<Scenario> = Object.freeze({
  tokens: 16,
  chunks: null,
  pauseMs: 0,
  keepaliveMs: 0,
  usageShape: "empty_choices",
  noCost: false,
  noUsage: false,
  noDone: false,
  status: null,
  retryAfter: 1,
  error200: false,
  midStreamError: false,
  stallBeforeHeaders: false,
  stallMidStream: false,
  resetMidStream: false,
  after: null,
  splitFrames: false,
  crlf: false,
  comments: false,
  multilineData: false,
  badJson: false,
  bigLine: null,
  padLines: null,
  reasoning: null,
  // OpenAI's cost of one 1024×1024 image at high detail (85 + 4 × 170 tokens).
  imageTokens: 765,
  resultTokens: 300,
  failOver: 0,
  promptTokens: null,
  delayMs: 0,
  cancellable: null,
  recordAfterMs: null,
});

const MAX_BIG_LINE_BYTES = 64 * 1024 * 1024;

type Setter = (value: string | undefined, into: ScenarioInput) => string | null;

type CountField =
  | "tokens"
  | "chunks"
  | "pauseMs"
  | "keepaliveMs"
  | "retryAfter"
  | "after"
  | "reasoning"
  | "imageTokens"
  | "resultTokens"
  | "failOver"
  | "promptTokens"
  | "delayMs"
  | "recordAfterMs";

function count(field: CountField): Setter {
  return (value, into) => {
    const n = Number(value);
    if (value === undefined || !Number.isSafeInteger(n) || n < 0) return "needs a non-negative integer";
    into[field] = n;
    return null;
  };
}

function lineBytes(field: "bigLine" | "padLines"): Setter {
  return (value, into) => {
    const n = Number(value);
    // The mock builds the line in memory: keep a typo from asking for gigabytes.
    if (!Number.isSafeInteger(n) || n < 1 || n > MAX_BIG_LINE_BYTES) return `needs a byte count (1-${MAX_BIG_LINE_BYTES})`;
    into[field] = n;
    return null;
  };
}

type FlagField =
  | "noCost"
  | "noUsage"
  | "noDone"
  | "error200"
  | "midStreamError"
  | "stallBeforeHeaders"
  | "stallMidStream"
  | "resetMidStream"
  | "splitFrames"
  | "crlf"
  | "comments"
  | "multilineData"
  | "badJson";

/** A flag's value: bare or =true/1 is true, =false/0 is false; anything else is null. */
function flagValue(value: string | undefined): boolean | null {
  if (value === undefined || value === "1" || value === "true") return true;
  if (value === "0" || value === "false") return false;
  return null;
}

function flag(field: FlagField): Setter {
  return (value, into) => {
    const on = flagValue(value);
    if (on === null) return "is a flag (bare, or =true/false)";
    into[field] = on;
    return null;
  };
}

const SETTERS: Record<string, Setter> = {
  tokens: count("tokens"),
  chunks: count("chunks"),
  pause_ms: count("pauseMs"),
  keepalive_ms: count("keepaliveMs"),
  retry_after: count("retryAfter"),
  after: count("after"),
  status: (value, into) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 400 || n > 599) return "needs an HTTP error status (400-599)";
    into.status = n;
    return null;
  },
  usage_shape: (value, into) => {
    if (value !== "empty_choices" && value !== "empty_choice" && value !== "in_finish") {
      return "is one of empty_choices, empty_choice, in_finish";
    }
    into.usageShape = value;
    return null;
  },
  no_cost: flag("noCost"),
  no_usage: flag("noUsage"),
  no_done: flag("noDone"),
  error_200: flag("error200"),
  mid_stream_error: flag("midStreamError"),
  stall_before_headers: flag("stallBeforeHeaders"),
  stall_mid_stream: flag("stallMidStream"),
  reset_mid_stream: flag("resetMidStream"),
  split_frames: flag("splitFrames"),
  crlf: flag("crlf"),
  comments: flag("comments"),
  multiline_data: flag("multilineData"),
  bad_json: flag("badJson"),
  big_line: lineBytes("bigLine"),
  pad_lines: lineBytes("padLines"),
  reasoning: count("reasoning"),
  image_tokens: count("imageTokens"),
  result_tokens: count("resultTokens"),
  fail_over: count("failOver"),
  prompt_tokens: count("promptTokens"),
  delay_ms: count("delayMs"),
  record_after_ms: count("recordAfterMs"),
  // `cancellable` and `no_cancel` pick the provider's kind for one request (MockProvider.cancellable).
  cancellable: (value, into) => {
    const on = flagValue(value);
    if (on === null) return "is a flag (bare, or =true/false)";
    into.cancellable = on;
    return null;
  },
  no_cancel: (value, into) => {
    const on = flagValue(value);
    if (on === null) return "is a flag (bare, or =true/false)";
    into.cancellable = !on;
    return null;
  },
};

const DIRECTIVE = /\[\[mock(?:\s+([^\]]*))?\]\]/g;

/** Reads every `[[mock …]]` directive in `text`. Unknown keys are errors: a typo must not pass silently. */
export function parseDirectives(text: string): { settings: ScenarioInput; errors: string[] } {
  const settings: ScenarioInput = {};
  const errors: string[] = [];
  if (!text.includes("[[mock")) return { settings, errors };
  for (const match of text.matchAll(DIRECTIVE)) {
    for (const word of (match[1] ?? "").split(/\s+/)) {
      if (word === "") continue;
      const eq = word.indexOf("=");
      const key = eq === -1 ? word : word.slice(0, eq);
      const value = eq === -1 ? undefined : word.slice(eq + 1);
      const set = SETTERS[key];
      const problem = set ? set(value, settings) : "is not a mock directive key";
      if (problem) errors.push(`[[mock]] ${key} ${problem}`);
    }
  }
  return { settings, errors };
}

/** Parses a defaults string like "tokens=4 crlf" (the inside of a directive). */
export function parseScenarioDefaults(defaults: string | ScenarioInput | undefined): ScenarioInput {
  if (defaults === undefined) return {};
  if (typeof defaults !== "string") return defaults;
  const { settings, errors } = parseDirectives(`[[mock ${defaults}]]`);
  if (errors.length > 0) throw new Error(`invalid mock defaults: ${errors.join("; ")}`);
  return settings;
}

/** The scenario for one request: built-in defaults, then the mock's defaults, then the directives. */
export function resolveScenario(defaults: ScenarioInput, lastMessageText: string): { scenario: Scenario; errors: string[] } {
  const { settings, errors } = parseDirectives(lastMessageText);
  return { scenario: { ...DEFAULT_SCENARIO, ...defaults, ...settings }, errors };
}
