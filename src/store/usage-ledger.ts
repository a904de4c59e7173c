/**
 * How a row's cost was found: the upstream's `usage.cost` ("upstream"), its token counts at
 * our prices ("computed"), the upstream's record of the generation ("generation"), or the
 * reservation charged whole when no record could say ("reservation"). "estimated" is kept
 * for rows written before calls were reconciled.
 */
export type UsageSource = "upstream" | "computed" | "generation" | "reservation" | "estimated";

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
  /** `ok`, `upstream_error`, `client_disconnected`, `upstream_stalled`, ... */
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
}

/** Keyset position for paging a user's rows newest first. */
export interface UsageCursor {
  startedAt: number;
  requestId: string;
}

/** The usage ledger and its per-account totals, always written together. */
export interface UsageLedgerRepository {
  /**
   * Writes rows and totals atomically; returns how many rows were new. A row whose
   * request id is already there (a replay) changes nothing, totals included.
   */
  insertBatch(rows: UsageRow[]): Promise<number>;
  /** A user's rows in one period, newest first, keyset-paginated by (started_at, request_id). */
  listForUser(appId: string, appUserId: string, period: string, limit: number, before?: UsageCursor): Promise<UsageRow[]>;
  find(requestId: string): Promise<UsageRow | null>;
  /** An app's rows that started in [fromMs, toMs), oldest first, a page after `after` (for export). */
  listForApp(appId: string, fromMs: number, toMs: number, limit: number, after?: UsageCursor): Promise<UsageRow[]>;
}
