import { usdToNanoCeil } from "../money";
import type { UsageSource } from "../budget/usage-row";
import type { ReasoningAsk } from "./request-shape";
import type { UpstreamUsage } from "./usage";
import { costAtWorstRates, worstCaseNano, type CostBounds } from "./worst-case";

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
  /** Reserve at least this, or refuse: fixed costs, the prompt and a minimal completion (and reasoning). */
  minNano: number;
  /** Reserve this much if the budget allows: the full completion and reasoning limits. */
  desiredNano: number;
  /** max_tokens before budget clamping: the request's (or the default), capped by the models' limit. */
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
 * Worst-case cost of a request (ARCHITECTURE.md §3 "The hard cap"), at the priciest model that
 * may serve it: fixed costs, plus the prompt bound at the highest input rate, plus
 * (max_tokens + reasoning) × choices at the highest output rate, rounded up. A request
 * without max_tokens reserves `defaultMaxTokens`, not the model's whole limit, so that
 * one call does not lock the budget away from the user's other calls.
 */
export function planReservation(bounds: CostBounds, requestedMaxTokens: number | null, defaultMaxTokens: number, ask: ReasoningAsk): ReservationPlan {
  const modelLimit = Math.max(...bounds.models.map((m) => m.modelLimit));
  const completionLimit = Math.min(requestedMaxTokens ?? defaultMaxTokens, modelLimit);
  const reasoning = bounds.models.some((m) => m.reasons) ? reasoningPlan(ask, completionLimit) : null;
  return {
    minNano: worstCaseNano(bounds, Math.min(MIN_COMPLETION_TOKENS, completionLimit), reasoning?.min ?? 0),
    desiredNano: worstCaseNano(bounds, completionLimit, reasoning?.limit ?? 0),
    completionLimit,
    reasoning,
  };
}

function reasoningPlan(ask: ReasoningAsk, completionLimit: number): NonNullable<ReservationPlan["reasoning"]> {
  if (ask.kind === "off") return { limit: completionLimit, min: 0, sent: false };
  const wanted = ask.kind === "tokens" ? ask.maxTokens : ask.kind === "effort" ? Math.ceil((EFFORT_SHARE[ask.effort] ?? 1) * completionLimit) : completionLimit;
  return { limit: Math.max(MIN_REASONING_TOKENS, wanted), min: MIN_REASONING_TOKENS, sent: true };
}

/**
 * The largest limits whose worst case fits in what was granted. When the grant is short
 * of the plan, completion and reasoning shrink in proportion, each above its minimum.
 */
export function grantedLimits(plan: ReservationPlan, bounds: CostBounds, grantedNano: number): GrantedLimits {
  const limitsAt = (total: number) => splitOutput(plan, total);
  const fits = (total: number) => {
    const { maxTokens, reasoning } = limitsAt(total);
    return worstCaseNano(bounds, maxTokens, reasoning) <= grantedNano;
  };
  // The worst case grows with the total, so the largest total that fits is found by bisection.
  let low = Math.min(MIN_COMPLETION_TOKENS, plan.completionLimit) + (plan.reasoning?.min ?? 0);
  let high = plan.completionLimit + (plan.reasoning?.limit ?? 0);
  if (fits(high)) low = high;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (fits(mid)) low = mid;
    else high = mid - 1;
  }
  const { maxTokens, reasoning } = limitsAt(low);
  return { maxTokens, reasoningMaxTokens: plan.reasoning?.sent ? reasoning : null, outputTokens: maxTokens + reasoning };
}

/** Splits `total` output tokens between completion and reasoning in the plan's proportion, each at least its minimum. */
function splitOutput(plan: ReservationPlan, total: number): { maxTokens: number; reasoning: number } {
  const wantedReasoning = plan.reasoning?.limit ?? 0;
  const wanted = plan.completionLimit + wantedReasoning;
  if (total >= wanted) return { maxTokens: plan.completionLimit, reasoning: wantedReasoning };
  if (!plan.reasoning) return { maxTokens: total, reasoning: 0 };
  const minCompletion = Math.min(MIN_COMPLETION_TOKENS, plan.completionLimit);
  const reasoning = Math.max(plan.reasoning.min, total - Math.max(minCompletion, Math.floor((total * plan.completionLimit) / wanted)));
  return { maxTokens: Math.max(1, total - reasoning), reasoning };
}

export interface Charge {
  costNano: number;
  source: UsageSource;
  promptTokens: number;
  completionTokens: number;
  /** The upstream's own numbers the charge was made from (not for the reservation): the meter checks them before they become a row (./usage-check.ts). */
  reported?: UpstreamUsage;
}

/**
 * What a finished request costs: the upstream's `usage.cost` when it reports one (it covers
 * every billed dimension), else its token counts at the worst-case rates plus the fixed
 * costs. Null without usage: then the cost comes from the upstream's record of the
 * generation (src/metering/reconciler.ts), never from a guess.
 */
export function chargeFor(bounds: CostBounds, usage: UpstreamUsage | null): Charge | null {
  if (usage && usage.costUsd !== null) {
    return {
      costNano: usdToNanoCeil(usage.costUsd),
      source: "upstream",
      promptTokens: usage.promptTokens,
      completionTokens: usage.completionTokens,
      reported: usage,
    };
  }
  if (usage) {
    const costNano = costAtWorstRates(bounds, usage.promptTokens, usage.completionTokens);
    return { costNano, source: "computed", promptTokens: usage.promptTokens, completionTokens: usage.completionTokens, reported: usage };
  }
  return null;
}

/** The whole reservation, charged when nothing else can say what the call cost: never less than the upstream could have billed. */
export function reservationCharge(reservedNano: number): Charge {
  return { costNano: reservedNano, source: "reservation", promptTokens: 0, completionTokens: 0 };
}
