import type { GenerationRecord } from "./generation-log";
import type { KeySettings, MockKeyAccount } from "./keys";
import type { MockModel } from "./models";
import type { Scenario, ScenarioInput } from "./scenario";

/** One POST /chat/completions the mock received, for tests to compare with the proxy's ledger. */
export interface ServedRequest {
  /** The generation id (`gen-…`): the body's `id` and the `X-Generation-Id` header. */
  id: string;
  /** The model asked for: `model`, or the first of `models` when `model` is absent. */
  model: string;
  /** The model that served, after fallbacks and routing (a router's routed model); "" if none did. */
  servedModel: string;
  /** The provider that served: a `providers` name, or "Mock"; "" if none did. */
  provider: string;
  stream: boolean;
  /** `max_tokens` (or `max_completion_tokens`) as sent; null when absent. */
  maxTokens: number | null;
  /** All prompt tokens: the text's plus those images and web search results add. */
  promptTokens: number;
  /**
   * Completion tokens, reasoning included: the whole planned completion (what the usage
   * reports) until the generation ends, then what it produced (less when a stream was
   * cancelled or met a mid-stream error).
   */
  completionTokens: number;
  /** Reasoning tokens inside completionTokens (they are not limited by max_tokens). */
  reasoningTokens: number;
  /** Content tokens actually handed to the response so far (less when a stream was cut); reasoning not included. */
  deliveredTokens: number;
  /** Input images billed. */
  images: number;
  /** Web search results billed. */
  webResults: number;
  /** Prompt tokens billed at the cache-write price. */
  cacheWriteTokens: number;
  /**
   * USD the upstream bills for the generation in the end, its record's `total_cost`: tokens,
   * request fee, images, web results, reasoning and cache writes, at the serving provider's
   * prices. While it runs, the planned bill (usage.cost, also when `no_cost` hides it); once
   * it has ended, what was billed: less for a cancelled stream, the tokens waived for an
   * error (see ./generation.ts). 0 for a request that never became a generation.
   */
  costUsd: number;
  /** The resolved scenario; null when the request failed before it was read. */
  scenario: Scenario | null;
  /** HTTP status of the answer (200 also for `error_200`). */
  status: number;
  /** The response was delivered to its planned end. */
  completed: boolean;
  /** The client went away (body cancelled or request aborted) before the end. */
  aborted: boolean;
  /** The stream was aborted on a cancellable provider: the generation stopped there (its record's `cancelled`). */
  cancelled: boolean;
  /** Mock clock, ms since the epoch. */
  receivedAt: number;
  /** Request headers as received, lower-case names. */
  headers: Record<string, string>;
  /** The parsed JSON body; undefined when it did not parse. */
  body: unknown;
}

export interface MockUpstreamOptions {
  /** The catalogue; defaults to DEFAULT_MODELS. The array is live: edits show in /models. */
  models?: MockModel[];
  /** Scenario for every request, under the per-request directives: "tokens=4 crlf" or an object. */
  defaults?: string | ScenarioInput;
  /**
   * Clock for `created` and `receivedAt`, ms since the epoch; also the clock of the PKCE
   * codes' 10 minutes, of key expiry and of the daily, weekly and monthly usage periods.
   */
  now?: () => number;
  /** Keep the `served` log (default true); turn off for long load runs. */
  recordServed?: boolean;
  /** Requests per minute announced in the x-ratelimit-* headers (default 1000). */
  rateLimitPerMinute?: number;
  /**
   * How long after a generation ends its record appears at GET /generation (404 until
   * then), on the `now` clock; default 0. The `record_after_ms` directive sets it per request.
   */
  generationRecordDelayMs?: number;
  /** Records kept for GET /generation: those of the latest N generation ids (default 10,000; 0 keeps none). */
  generationRecordLimit?: number;
  /**
   * Streams send their reasoning and content at this many tokens a second, as a model writes
   * them (./pacing.ts); default 0: as fast as the reader takes them. Demo mode sets it so the
   * answers visibly stream; billing is the same either way.
   */
  streamTokensPerSecond?: number;
  /**
   * The operator's upstream keys: they pay for calls up to `operatorLimitUsd`. Default: any
   * bearer key that is not of the shape the mock issues (`sk-or-v1-` and 64 hex digits) is an
   * operator key, as every key was before the mock had accounts (demo mode's "demo", the
   * tests' keys). Given, every other key the mock did not issue is unknown: 401.
   */
  operatorKeys?: readonly string[];
  /** Credit limit in USD of each operator key (never reset); default none. A small one lets a test run the operator out of credit: 402. */
  operatorLimitUsd?: number;
  /**
   * The origins the /auth page may send a browser back to (`callback_url`), e.g. the one
   * service the page is served for (demo mode: the service's own origin). Default: any the
   * spec allows (https, or http on localhost), as OpenRouter's page does.
   */
  authCallbackOrigins?: readonly string[];
}

/** The upstream keys the mock knows (./keys.ts). */
export interface MockKeys {
  /** A user key made directly, as an approved PKCE flow would make it (tests that skip the page). */
  create(settings?: Partial<KeySettings>, userId?: string): MockKeyAccount;
  /** A key's account and books (live: set `disabled`, `deleted` or `limitUsd` as its owner could); undefined if never seen. */
  get(key: string): MockKeyAccount | undefined;
}

export interface MockUpstream {
  /** A Web-standard fetch handler: serve it with Bun.serve or call it in-process. */
  fetch(request: Request): Promise<Response>;
  served: ServedRequest[];
  models: MockModel[];
  /** A generation's record whether or not it has appeared yet; undefined when there is none (yet). */
  generation(id: string): GenerationRecord | undefined;
  keys: MockKeys;
}
