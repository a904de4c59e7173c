import { formatUsd, nanoToUsd, NANO_PER_USD } from "../money";
import type { UpstreamUsage } from "./usage";

/**
 * Whether the usage an upstream reported for a call can be true, before it becomes a
 * charge (src/metering/meter.ts). The answer's usage, a stream's (the SSE scanner's) and
 * the upstream's record of a generation (the reconciler's) all come here.
 *
 * A number that cannot be true is one that is not a count at all (negative, fractional,
 * not finite, or past what integers hold exactly once in nano-dollars), or one far beyond
 * what the call could use: an absurd one. An overrun short of that can be true (the
 * upstream's price rose after the catalogue was read, a provider counts tokens its own
 * way), so it is charged as billed and freezes the account (ARCHITECTURE.md §3).
 */

/**
 * How many times what a call could use a reported number must pass to be absurd. Prices
 * change by small factors; a hundred times the reservation, which is priced at the priciest
 * model that may serve the call and its every billed dimension, is no price change but a
 * broken number (a `cost: 1e300` was seen). The slacks below are added to the bound.
 */
export const ABSURD_MULTIPLE = 100;
/** Added to the cost bound: one dollar, so that a call that reserved next to nothing (a free model) can still overrun plausibly. */
export const ABSURD_COST_SLACK_NANO = NANO_PER_USD;
/** Added to the token bounds: room for a provider's own system or tool prompt, which the request's body does not show. */
export const ABSURD_TOKEN_SLACK = 10_000;

/** What the call could use, as its reservation bounded it. */
export interface UsageAllowance {
  /** What the call reserved, nano-dollars. */
  reservedNano: number;
  /** The most prompt tokens its request can have; unknown for a call settled from the journal. */
  promptTokens?: number;
  /** The most output tokens (completion and reasoning, every choice) the limits sent allow; unknown likewise. */
  outputTokens?: number;
}

/**
 * Why `reported` cannot be true, or null when it can. `chargedNano` is what it would be
 * charged (its cost, or its tokens at the call's prices): an amount past what counters hold
 * exactly, or absurd for the reservation, is a broken number too.
 */
export function usageProblem(reported: UpstreamUsage, chargedNano: number, allowed: UsageAllowance): string | null {
  const counts = [
    { kind: "prompt", count: reported.promptTokens, bound: allowed.promptTokens },
    { kind: "completion", count: reported.completionTokens, bound: allowed.outputTokens },
  ];
  for (const { kind, count } of counts) {
    if (!Number.isSafeInteger(count) || count < 0) return `a ${kind} token count of ${count}, not a whole number of tokens`;
  }
  const cost = reported.costUsd;
  if (cost !== null && !(Number.isFinite(cost) && cost >= 0)) return `a cost of ${cost} USD, not an amount`;
  if (!Number.isSafeInteger(chargedNano) || chargedNano < 0) {
    return `${cost !== null ? `a cost of ${cost} USD` : `a cost from its tokens of ${chargedNano} nano-dollars`}, past what the service counts exactly`;
  }
  const costBound = ABSURD_MULTIPLE * allowed.reservedNano + ABSURD_COST_SLACK_NANO;
  if (chargedNano > costBound) {
    return `a cost of ${formatUsd(nanoToUsd(chargedNano))}, over ${ABSURD_MULTIPLE} times the ${formatUsd(nanoToUsd(allowed.reservedNano))} reserved (and $1 more)`;
  }
  for (const { kind, count, bound } of counts) {
    if (bound !== undefined && count > ABSURD_MULTIPLE * bound + ABSURD_TOKEN_SLACK) {
      return `a ${kind} token count of ${count}, over ${ABSURD_MULTIPLE} times the ${bound} the request allowed (and ${ABSURD_TOKEN_SLACK} more)`;
    }
  }
  return null;
}
