import type { ModelPrice } from "./pricing";
import type { UpstreamUsage } from "./usage";
import { usdToNanoCeil } from "../money";
import type { UsageSource } from "../store/usage-ledger";

/**
 * The smallest completion worth sending upstream. Below this a request is refused with
 * 402 rather than sent with a max_tokens too small to be useful.
 */
export const MIN_COMPLETION_TOKENS = 16;

export interface ReservationPlan {
  promptCostNano: number;
  /** Reserve at least this, or refuse: the prompt plus a minimal completion. */
  minNano: number;
  /** Reserve this much if the budget allows: the prompt plus the full completion limit. */
  desiredNano: number;
  /** The completion limit before budget clamping: the request's, capped by the model's. */
  completionLimit: number;
}

/**
 * Worst-case cost of a request (DESIGN.md §3 "The hard cap"): prompt bound × prompt price
 * plus completion limit × completion price, rounded up.
 */
export function planReservation(price: ModelPrice, promptBoundTokens: number, requestedMaxTokens: number | null): ReservationPlan {
  // The prompt bound over-estimates on purpose, so it must not shrink the completion limit.
  const modelLimit = Math.max(1, price.maxCompletionTokens);
  const completionLimit = Math.min(requestedMaxTokens ?? modelLimit, modelLimit);
  const promptCostNano = Math.ceil(promptBoundTokens * price.promptNanoPerToken);
  const completionCost = (tokens: number) => Math.ceil(tokens * price.completionNanoPerToken);
  return {
    promptCostNano,
    minNano: promptCostNano + completionCost(Math.min(MIN_COMPLETION_TOKENS, completionLimit)),
    desiredNano: promptCostNano + completionCost(completionLimit),
    completionLimit,
  };
}

/** The largest max_tokens whose worst case fits in what was granted. */
export function affordableMaxTokens(plan: ReservationPlan, price: ModelPrice, grantedNano: number): number {
  if (price.completionNanoPerToken <= 0) return plan.completionLimit;
  const affordable = Math.floor((grantedNano - plan.promptCostNano) / price.completionNanoPerToken);
  // Guard against float edge cases: never above what the grant covers when rounded up.
  let tokens = Math.min(plan.completionLimit, Math.max(0, affordable));
  while (tokens > 0 && plan.promptCostNano + Math.ceil(tokens * price.completionNanoPerToken) > grantedNano) tokens--;
  return tokens;
}

export interface Charge {
  costNano: number;
  source: UsageSource;
  promptTokens: number;
  completionTokens: number;
}

/**
 * What a finished request costs: the upstream's `usage.cost` when it reports one, else its
 * token counts at catalogue prices. Without usage, an estimate bounded by the reservation.
 */
export function chargeFor(price: ModelPrice, usage: UpstreamUsage | null, estimate: () => Charge): Charge {
  if (usage && usage.costUsd !== null) {
    return { costNano: usdToNanoCeil(usage.costUsd), source: "upstream", promptTokens: usage.promptTokens, completionTokens: usage.completionTokens };
  }
  if (usage) {
    const costNano =
      Math.ceil(usage.promptTokens * price.promptNanoPerToken) + Math.ceil(usage.completionTokens * price.completionNanoPerToken);
    return { costNano, source: "computed", promptTokens: usage.promptTokens, completionTokens: usage.completionTokens };
  }
  return estimate();
}

/**
 * The estimate when the usage never came: the prompt bound at its price plus one token per
 * relayed event at the completion price, never more than was reserved.
 */
export function estimateCharge(plan: ReservationPlan, price: ModelPrice, promptBoundTokens: number, completionEvents: number, grantedNano: number): Charge {
  const completionTokens = Math.min(completionEvents, plan.completionLimit);
  const costNano = Math.min(grantedNano, plan.promptCostNano + Math.ceil(completionTokens * price.completionNanoPerToken));
  return { costNano, source: "estimated", promptTokens: promptBoundTokens, completionTokens };
}
