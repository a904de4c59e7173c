/**
 * What an upstream key has spent, in the periods GET /key reports (`usage`, `usage_daily`,
 * `usage_weekly`, `usage_monthly`: the current UTC day, the current UTC week from Monday,
 * the current UTC month), and what its credit limit leaves. A key whose `usage_limit_type`
 * is set has its limit reset on that interval (POST /auth/keys/code: "When set, the credit
 * limit resets on this interval"), so its limit holds against that period's usage; without
 * one, against all its usage.
 */

export const USAGE_LIMIT_TYPES = ["daily", "weekly", "monthly"] as const;
export type UsageLimitType = (typeof USAGE_LIMIT_TYPES)[number];

export function isUsageLimitType(value: unknown): value is UsageLimitType {
  return (USAGE_LIMIT_TYPES as readonly unknown[]).includes(value);
}

const DAY_MS = 86_400_000;

/** The period `ms` falls in, as a number that changes exactly when the period does. */
function periodOf(type: UsageLimitType, ms: number): number {
  const day = Math.floor(ms / DAY_MS);
  if (type === "daily") return day;
  // Day 0 (1970-01-01) was a Thursday: shifting by 3 makes weeks start on Mondays.
  if (type === "weekly") return Math.floor((day + 3) / 7);
  const date = new Date(ms);
  return date.getUTCFullYear() * 12 + date.getUTCMonth();
}

interface PeriodUsage {
  period: number;
  usd: number;
}

/** USD billed to one key: all time and in its current periods. */
export class KeyUsage {
  /** USD billed all time. */
  total = 0;
  private readonly periods: Record<UsageLimitType, PeriodUsage> = {
    daily: { period: -1, usd: 0 },
    weekly: { period: -1, usd: 0 },
    monthly: { period: -1, usd: 0 },
  };

  add(usd: number, now: number): void {
    this.total = roundUsd(this.total + usd);
    for (const type of USAGE_LIMIT_TYPES) {
      const current = this.periods[type];
      const period = periodOf(type, now);
      if (current.period !== period) this.periods[type] = { period, usd: roundUsd(usd) };
      else current.usd = roundUsd(current.usd + usd);
    }
  }

  /** USD billed in the period `now` falls in (0 once a new period has begun). */
  in(type: UsageLimitType, now: number): number {
    const current = this.periods[type];
    return current.period === periodOf(type, now) ? current.usd : 0;
  }

  /** What a limit leaves at `now`: null without a limit; negative once a call overran it. */
  remaining(limitUsd: number | null, limitType: UsageLimitType | null, now: number): number | null {
    if (limitUsd === null) return null;
    return roundUsd(limitUsd - (limitType === null ? this.total : this.in(limitType, now)));
  }
}

/** Sums of catalogue prices are exact at 1e-12 (see ./billing.ts): rounding there drops float noise. */
function roundUsd(usd: number): number {
  return Math.round(usd * 1e12) / 1e12;
}
