/*
 * The ledger's row: what the budget ledgers settle with (BudgetLedger.settle) and the store
 * keeps. It sits on the budget floor, where the store and the ledgers meet
 * (ARCHITECTURE.md §5 "The dependency rule").
 */

/**
 * How a row's cost was found: the upstream's `usage.cost` ("upstream"), its token counts at
 * our prices ("computed"), the upstream's record of the generation ("generation"), or the
 * reservation charged whole when no record could say ("reservation"). "estimated" is kept
 * for rows written before calls were reconciled.
 */
export type UsageSource = "upstream" | "computed" | "generation" | "reservation" | "estimated";

/**
 * The status of a row whose call the upstream reported usage for that cannot be true (a cost
 * or token count not a count, or absurd: src/pricing/usage-check.ts): charged its reservation.
 */
export const UPSTREAM_USAGE_INVALID = "upstream_usage_invalid";

/** One metered request, as written to the ledger. Amounts in nano-dollars. */
export interface UsageRow {
  requestId: string;
  account: string;
  appId: string;
  appUserId: string | null;
  grantId: string | null;
  period: string;
  model: string;
  generationId: string | null;
  promptTokens: number;
  completionTokens: number;
  costNano: number;
  source: UsageSource;
  /** `ok`, `upstream_error`, `client_disconnected`, `upstream_stalled`, UPSTREAM_USAGE_INVALID, ... */
  status: string;
  streamed: boolean;
  startedAt: number;
  finishedAt: number;
  /** What was reserved for it; null on rows written before reservations were recorded. */
  reservedNano?: number | null;
  /** How much the cost passed the reservation (0 normally). */
  overrunNano?: number;
  /** On an overrun: the cap the account is frozen at (see BudgetLedger.settle). */
  frozenCapNano?: number | null;
  /**
   * A grant call that cost more than its app's daily ceiling reserved for it: the ceiling its
   * day is frozen at, as the ceiling's settle froze it in the live counters. Not a column of
   * the ledger: the stores put it on the day's totals, so a restart keeps the day frozen.
   */
  dayFrozenCapNano?: number | null;
}
