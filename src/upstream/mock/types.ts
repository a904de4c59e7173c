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
  /** Completion tokens the usage reports (or would report): the whole planned completion, reasoning included. */
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
   * USD the generation costs, as usage.cost reports it (also when `no_cost` hides it): tokens,
   * request fee, images, web results, reasoning and cache writes, at the serving provider's prices.
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
  /** Clock for `created` and `receivedAt`, ms since the epoch. */
  now?: () => number;
  /** Keep the `served` log (default true); turn off for long load runs. */
  recordServed?: boolean;
  /** Requests per minute announced in the x-ratelimit-* headers (default 1000). */
  rateLimitPerMinute?: number;
}

export interface MockUpstream {
  /** A Web-standard fetch handler: serve it with Bun.serve or call it in-process. */
  fetch(request: Request): Promise<Response>;
  served: ServedRequest[];
  models: MockModel[];
}
