import type { UpstreamClient } from "./client";

/**
 * What the upstream says a generation cost: `GET /generation?id=` (spec: getGeneration;
 * GenerationResponse's `data.total_cost`, USD, and its token counts), as the record gives
 * them, unchecked. The record can take a while to appear after the generation ends, and
 * until then the endpoint answers 404.
 */
export type GenerationRecord =
  | { found: true; costUsd: number; promptTokens: number; completionTokens: number }
  /** `why`: for the log; the caller looks again later, or gives up. */
  | { found: false; why: string };

/** Looked up with the key that paid the generation (a user's own, or by default the operator's): the upstream shows a record to its account. */
export async function lookUpGeneration(upstream: UpstreamClient, generationId: string, apiKey?: string): Promise<GenerationRecord> {
  let response: Response;
  try {
    response = await upstream.get(`/generation?id=${encodeURIComponent(generationId)}`, apiKey);
  } catch (err) {
    return { found: false, why: `the upstream could not be reached: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (response.status !== 200) {
    await response.body?.cancel().catch(() => {});
    return { found: false, why: response.status === 404 ? "no record yet" : `HTTP ${response.status}` };
  }
  let body: unknown;
  try {
    body = await response.json();
  } catch {
    return { found: false, why: "the record is not JSON" };
  }
  const data = (body as { data?: Record<string, unknown> } | null)?.data;
  const cost = data?.total_cost ?? data?.usage;
  if (typeof cost !== "number") return { found: false, why: "the record has no total_cost" };
  // The numbers as the record gives them, also ones that cannot be true: the meter checks
  // them (src/pricing/usage-check.ts), as it checks an answer's usage.
  return { found: true, costUsd: cost, promptTokens: count(data?.tokens_prompt), completionTokens: count(data?.tokens_completion) };
}

/** A token count as the record gives it; 0 when it gives none. */
const count = (value: unknown): number => (typeof value === "number" ? value : 0);
