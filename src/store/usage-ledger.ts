import type { UsageRow } from "../budget/usage-row";

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
