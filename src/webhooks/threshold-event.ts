import { nanoToUsd } from "../money";
import type { BudgetTarget } from "../budget/target";
import type { WebhookEventDraft } from "../store/webhooks";

/** The levels of a user's monthly cap that `budget.threshold` reports, in percent. */
export const THRESHOLD_LEVELS = [80, 100] as const;
export type ThresholdLevel = (typeof THRESHOLD_LEVELS)[number];

/**
 * Why a level was reported. `spent`: the spend itself reached the level. `refused`: a call
 * was refused because what is left of the cap does not cover its smallest reservation (its
 * prompt and a minimal completion), so the user can spend no more this period although the
 * spend stopped short of the level (only 100 % is reported this way).
 */
export type ThresholdReason = "spent" | "refused";

/**
 * The share of the cap spent, in percent, rounded down to two decimals (a hundredth of a
 * percent, a ten-thousandth of the cap).
 *
 * Rounded down, so that `usedPercent >= threshold` exactly when the spend reached the level:
 * a refusal at 99.996 % reads 99.99, never a 100 that looks like a spent cap. Two decimals
 * show how far short of the cap a refusal came (82.83) without pretending to more; the
 * exact amounts are `usedUsd` and `limitUsd`. Computed in BigInt: spent × 10 000 passes
 * 2^53 for caps above about $900 000, which JS numbers would round. It is over 100 when an
 * upstream billed above its listed price and the spend passed the cap.
 */
export function usedPercent(spentNano: number, capNano: number): number {
  // Caps are at least one nano-dollar (src/money.ts); a zero one would be a cap used up.
  if (capNano <= 0) return 100;
  const hundredths = (BigInt(spentNano) * 10_000n) / BigInt(capNano);
  return Number(hundredths) / 100;
}

/** Whether the spend itself reached `level` percent of the cap (integer arithmetic, no rounding). */
export function spendReached(spentNano: number, capNano: number, level: number): boolean {
  return BigInt(spentNano) * 100n >= BigInt(capNano) * BigInt(level);
}

/** The `budget.threshold` event for one level of a user's cap, recorded at most once per key. */
export function thresholdEvent(
  target: BudgetTarget,
  level: ThresholdLevel,
  reason: ThresholdReason,
  spentNano: number,
  dedupKey: string,
): WebhookEventDraft & { dedupKey: string } {
  return {
    appId: target.appId,
    type: "budget.threshold",
    dedupKey,
    data: {
      appId: target.appId,
      userId: target.appUserId,
      threshold: level,
      reason,
      usedPercent: usedPercent(spentNano, target.capNano),
      limitUsd: nanoToUsd(target.capNano),
      usedUsd: nanoToUsd(spentNano),
      period: { start: target.period.start, end: target.period.end },
      resetsAt: target.resetsAt,
    },
  };
}
