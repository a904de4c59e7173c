/**
 * Reads a proxy's SQLite file from the outside, the way an operator would after a crash:
 * the usage ledger, the per-account totals and SQLite's own integrity check. Opened
 * read-write (not `readonly`) so that a WAL left behind by a killed process is recovered
 * by this connection rather than refused.
 */
import { Database } from "bun:sqlite";

export interface LedgerFileRow {
  request_id: string;
  account: string;
  app_user_id: string | null;
  generation_id: string | null;
  cost_nano: number;
  source: string;
  status: string;
  streamed: number;
  started_at: number;
  finished_at: number;
}

export interface LedgerFile {
  rows: LedgerFileRow[];
  /** usage_totals as stored: account → { spent, count }. */
  totals: Map<string, { spentNano: number; requestCount: number }>;
  /** `PRAGMA integrity_check`: ["ok"] when the file is sound. */
  integrity: string[];
}

export function readLedgerFile(databasePath: string): LedgerFile {
  const db = new Database(databasePath);
  try {
    const integrity = db
      .query<{ integrity_check: string }, []>("PRAGMA integrity_check")
      .all()
      .map((r) => r.integrity_check);
    const rows = db
      .query<LedgerFileRow, []>(
        `SELECT request_id, account, app_user_id, generation_id, cost_nano, source, status, streamed, started_at, finished_at
         FROM usage_ledger ORDER BY finished_at, request_id`,
      )
      .all();
    const totals = new Map<string, { spentNano: number; requestCount: number }>();
    for (const t of db.query<{ account: string; spent_nano: number; request_count: number }, []>("SELECT * FROM usage_totals").all()) {
      totals.set(t.account, { spentNano: t.spent_nano, requestCount: t.request_count });
    }
    return { rows, totals, integrity };
  } finally {
    db.close();
  }
}

/** The ledger rows summed per account, in the shape of usage_totals. */
export function sumRowsPerAccount(rows: readonly LedgerFileRow[]): Map<string, { spentNano: number; requestCount: number }> {
  const sums = new Map<string, { spentNano: number; requestCount: number }>();
  for (const r of rows) {
    const sum = sums.get(r.account) ?? { spentNano: 0, requestCount: 0 };
    sum.spentNano += r.cost_nano;
    sum.requestCount += 1;
    sums.set(r.account, sum);
  }
  return sums;
}

/** Values of `values` that occur more than once. */
export function duplicates(values: ReadonlyArray<string | null>): string[] {
  const seen = new Set<string>();
  const twice = new Set<string>();
  for (const v of values) {
    if (v === null) continue;
    if (seen.has(v)) twice.add(v);
    seen.add(v);
  }
  return [...twice];
}
