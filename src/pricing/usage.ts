/**
 * Usage as the upstream reports it (OpenAI `usage` plus OpenRouter's `cost` in USD), its
 * numbers as sent: the meter checks them (./usage-check.ts) before any becomes a charge.
 */
export interface UpstreamUsage {
  promptTokens: number;
  completionTokens: number;
  /** OpenRouter's `usage.cost`, USD; absent on upstreams that do not report it. */
  costUsd: number | null;
}

export interface UpstreamErrorInfo {
  code: string | number | null;
  message: string;
}

/**
 * Reads `usage` from a parsed completion or chunk; null when it has no token counts. Numbers
 * are kept as they came, also ones that cannot be true (negative, fractional, or beyond
 * what JSON parses finitely, like `1e400`): reading them as absent would charge the call
 * from its tokens or its record instead, as if the upstream had said nothing.
 */
export function readUsage(body: unknown): UpstreamUsage | null {
  const usage = (body as { usage?: Record<string, unknown> } | null)?.usage;
  if (!usage || typeof usage !== "object") return null;
  const prompt = usage.prompt_tokens;
  const completion = usage.completion_tokens;
  if (typeof prompt !== "number" || typeof completion !== "number") return null;
  const cost = usage.cost;
  return { promptTokens: prompt, completionTokens: completion, costUsd: typeof cost === "number" ? cost : null };
}

/** Reads a top-level `error` object (OpenRouter's error body and mid-stream error chunk). */
export function readError(body: unknown): UpstreamErrorInfo | null {
  const error = (body as { error?: unknown } | null)?.error;
  if (!error || typeof error !== "object") return null;
  const { code, message } = error as { code?: unknown; message?: unknown };
  return {
    code: typeof code === "string" || typeof code === "number" ? code : null,
    message: typeof message === "string" ? message : "upstream error",
  };
}
