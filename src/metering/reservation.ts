import { usdToNanoCeil } from "../money";
import type { UsageSource } from "../store/usage-ledger";
import type { ReasoningAsk } from "./request-shape";
import type { UpstreamUsage } from "./usage";
import type { CostBounds } from "./worst-case";

/**
 * The smallest completion worth sending upstream. Below this a request is refused with
 * 402 rather than sent with a max_tokens too small to be useful.
 */
export const MIN_COMPLETION_TOKENS = 16;

/**
 * The smallest reasoning budget sent: Anthropic's thinking budget cannot be lower, and
 * OpenRouter raises a smaller `reasoning.max_tokens` to it (OpenRouter's reasoning-tokens
 * guide), so reserving less would under-reserve.
 */
export const MIN_REASONING_TOKENS = 1024;

/**
 * `reasoning.effort` as a share of max_tokens, as OpenRouter converts it for models that
 * take a token budget (OpenRouter's reasoning-tokens guide). The proxy sends the budget
 * itself so that reasoning cannot run past what was reserved.
 */
const EFFORT_SHARE: Record<string, number> = { max: 1, xhigh: 0.95, high: 0.8, medium: 0.5, low: 0.2, minimal: 0.1 };

export interface ReservationPlan {
  fixedNano: number;
  promptCostNano: number;
  /** Reserve at least this, or refuse: fixed costs, the prompt and a minimal completion (and reasoning). */
  minNano: number;
  /** Reserve this much if the budget allows: the full completion and reasoning limits. */
  desiredNano: number;
  /** max_tokens before budget clamping: the request's (or the default), capped by the model's. */
  completionLimit: number;
  /**
   * Reasoning tokens reserved on top of max_tokens (reasoning models can run past it).
   * `sent`: the proxy sends `reasoning.max_tokens`; otherwise the client turned reasoning
   * off and this is only a margin in case the model reasons anyway.
   */
  reasoning: { limit: number; min: number; sent: boolean } | null;
}

/** What a granted reservation allows: the limits sent upstream. */
export interface GrantedLimits {
  maxTokens: number;
  /** `reasoning.max_tokens` to send, or null to leave the client's reasoning fields alone. */
  reasoningMaxTokens: number | null;
  /** Output tokens (completion plus reasoning) the grant covers, per choice. */
  outputTokens: number;
}

/**
 * Worst-case cost of a request (DESIGN.md §3 "The hard cap"): fixed costs, plus the prompt
 * bound at the highest input rate, plus (max_tokens + reasoning) × choices at the highest
 * output rate, rounded up. A request without max_tokens reserves `defaultMaxTokens`, not
 * the model's whole limit, so that one call does not lock the budget away from the others.
 */
export function planReservation(bounds: CostBounds, requestedMaxTokens: number | null, defaultMaxTokens: number, ask: ReasoningAsk): ReservationPlan {
  const completionLimit = Math.min(requestedMaxTokens ?? defaultMaxTokens, bounds.modelLimit);
  const reasoning = reasoningPlan(bounds, ask, completionLimit);
  const promptCostNano = Math.ceil(bounds.promptTokens * bounds.promptPrice);
  const base = bounds.fixedNano + promptCostNano;
  return {
    fixedNano: bounds.fixedNano,
    promptCostNano,
    minNano: base + outputCost(bounds, Math.min(MIN_COMPLETION_TOKENS, completionLimit) + (reasoning?.min ?? 0)),
    desiredNano: base + outputCost(bounds, completionLimit + (reasoning?.limit ?? 0)),
    completionLimit,
    reasoning,
  };
}

function reasoningPlan(bounds: CostBounds, ask: ReasoningAsk, completionLimit: number): ReservationPlan["reasoning"] {
  if (!bounds.reasons) return null;
  if (ask.kind === "off") return { limit: completionLimit, min: 0, sent: false };
  const wanted =
    ask.kind === "tokens" ? ask.maxTokens : ask.kind === "effort" ? Math.ceil((EFFORT_SHARE[ask.effort] ?? 1) * completionLimit) : completionLimit;
  const limit = Math.max(MIN_REASONING_TOKENS, wanted);
  return { limit, min: MIN_REASONING_TOKENS, sent: true };
}

function outputCost(bounds: CostBounds, tokensPerChoice: number): number {
  return Math.ceil(tokensPerChoice * bounds.choices * bounds.outputPrice);
}

/**
 * The largest limits whose worst case fits in what was granted. When the grant is short
 * of the plan, completion and reasoning shrink in proportion, each above its minimum.
 */
export function grantedLimits(plan: ReservationPlan, bounds: CostBounds, grantedNano: number): GrantedLimits {
  const wantedReasoning = plan.reasoning?.limit ?? 0;
  const wanted = plan.completionLimit + wantedReasoning;
  let tokens = wanted;
  const perToken = bounds.choices * bounds.outputPrice;
  if (perToken > 0) {
    const base = plan.fixedNano + plan.promptCostNano;
    tokens = Math.min(wanted, Math.max(0, Math.floor((grantedNano - base) / perToken)));
    // Never above what the grant covers once rounded up (float edge cases).
    while (tokens > 0 && base + Math.ceil(tokens * perToken) > grantedNano) tokens--;
  }
  let maxTokens = plan.completionLimit;
  let reasoning = wantedReasoning;
  if (tokens < wanted) {
    const reasoningMin = plan.reasoning?.min ?? 0;
    maxTokens = Math.max(Math.min(MIN_COMPLETION_TOKENS, plan.completionLimit), Math.floor((tokens * plan.completionLimit) / wanted));
    reasoning = Math.max(reasoningMin, tokens - maxTokens);
    maxTokens = Math.max(1, Math.min(maxTokens, tokens - reasoning));
    if (!plan.reasoning) reasoning = 0;
  }
  return { maxTokens, reasoningMaxTokens: plan.reasoning?.sent ? reasoning : null, outputTokens: maxTokens + reasoning };
}

export interface Charge {
  costNano: number;
  source: UsageSource;
  promptTokens: number;
  completionTokens: number;
}

/**
 * What a finished request costs: the upstream's `usage.cost` when it reports one (it covers
 * every billed dimension), else its token counts at the worst-case rates plus the fixed
 * costs. Without usage, an estimate bounded by the reservation.
 */
export function chargeFor(bounds: CostBounds, plan: ReservationPlan, usage: UpstreamUsage | null, estimate: () => Charge): Charge {
  if (usage && usage.costUsd !== null) {
    return { costNano: usdToNanoCeil(usage.costUsd), source: "upstream", promptTokens: usage.promptTokens, completionTokens: usage.completionTokens };
  }
  if (usage) {
    const costNano =
      plan.fixedNano + Math.ceil(usage.promptTokens * bounds.promptPrice) + Math.ceil(usage.completionTokens * bounds.outputPrice);
    return { costNano, source: "computed", promptTokens: usage.promptTokens, completionTokens: usage.completionTokens };
  }
  return estimate();
}

/**
 * The estimate when the usage never came: fixed costs and the prompt bound, plus one token
 * per relayed event at the output rate, never more than was reserved.
 */
export function estimateCharge(plan: ReservationPlan, bounds: CostBounds, limits: GrantedLimits, completionEvents: number, grantedNano: number): Charge {
  const completionTokens = Math.min(completionEvents, limits.outputTokens);
  const costNano = Math.min(grantedNano, plan.fixedNano + plan.promptCostNano + Math.ceil(completionTokens * bounds.outputPrice));
  return { costNano, source: "estimated", promptTokens: bounds.promptTokens, completionTokens };
}
