import type { Database } from "bun:sqlite";
import type { UsageCursor, UsageLedgerRepository, UsageRow, UsageSource } from "../usage-ledger";

interface LedgerRow {
  request_id: string;
  account: string;
  app_id: string;
  app_user_id: string | null;
  grant_id: string | null;
  period: string;
  model: string;
  generation_id: string | null;
  prompt_tokens: number;
  completion_tokens: number;
  cost_nano: number;
  source: UsageSource;
  status: string;
  streamed: number;
  started_at: number;
  finished_at: number;
  reserved_nano: number | null;
  overrun_nano: number;
}

const toUsageRow = (r: LedgerRow): UsageRow => ({
  requestId: r.request_id,
  account: r.account,
  appId: r.app_id,
  appUserId: r.app_user_id,
  grantId: r.grant_id,
  period: r.period,
  model: r.model,
  generationId: r.generation_id,
  promptTokens: r.prompt_tokens,
  completionTokens: r.completion_tokens,
  costNano: r.cost_nano,
  source: r.source,
  status: r.status,
  streamed: r.streamed === 1,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  reservedNano: r.reserved_nano,
  overrunNano: r.overrun_nano,
});

export class SqliteUsageLedgerRepository implements UsageLedgerRepository {
  private readonly insertRow;
  private readonly addToTotals;
  private readonly writeBatch;

  constructor(private readonly db: Database) {
    this.insertRow = db.query(
      `INSERT OR IGNORE INTO usage_ledger (request_id, account, app_id, app_user_id, grant_id, period, model,
         generation_id, prompt_tokens, completion_tokens, cost_nano, source, status, streamed, started_at, finished_at,
         reserved_nano, overrun_nano)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.addToTotals = db.query(
      `INSERT INTO usage_totals (account, spent_nano, request_count, frozen_cap_nano) VALUES (?1, ?2, 1, ?3)
       ON CONFLICT (account) DO UPDATE SET spent_nano = spent_nano + ?2, request_count = request_count + 1,
         frozen_cap_nano = CASE WHEN ?3 IS NULL THEN frozen_cap_nano ELSE MAX(COALESCE(frozen_cap_nano, 0), ?3) END`,
    );
    // One transaction per batch; a row already present (a replay) changes nothing, so
    // the totals are only bumped for rows that were really inserted.
    this.writeBatch = db.transaction((rows: UsageRow[]) => {
      let inserted = 0;
      for (const r of rows) {
        const result = this.insertRow.run(
          r.requestId,
          r.account,
          r.appId,
          r.appUserId,
          r.grantId,
          r.period,
          r.model,
          r.generationId,
          r.promptTokens,
          r.completionTokens,
          r.costNano,
          r.source,
          r.status,
          r.streamed ? 1 : 0,
          r.startedAt,
          r.finishedAt,
          r.reservedNano ?? null,
          r.overrunNano ?? 0,
        );
        if (result.changes === 1) {
          inserted++;
          this.addToTotals.run(r.account, r.costNano, r.frozenCapNano ?? null);
        }
      }
      return inserted;
    });
  }

  async insertBatch(rows: UsageRow[]): Promise<number> {
    return this.writeBatch.immediate(rows) as number;
  }

  async listForUser(appId: string, appUserId: string, period: string, limit: number, before?: UsageCursor): Promise<UsageRow[]> {
    const rows = before
      ? this.db
          .query<LedgerRow, [string, string, string, number, number, string, number]>(
            `SELECT * FROM usage_ledger WHERE app_id = ? AND app_user_id = ? AND period = ?
               AND (started_at < ? OR (started_at = ? AND request_id < ?))
             ORDER BY started_at DESC, request_id DESC LIMIT ?`,
          )
          .all(appId, appUserId, period, before.startedAt, before.startedAt, before.requestId, limit)
      : this.db
          .query<LedgerRow, [string, string, string, number]>(
            `SELECT * FROM usage_ledger WHERE app_id = ? AND app_user_id = ? AND period = ?
             ORDER BY started_at DESC, request_id DESC LIMIT ?`,
          )
          .all(appId, appUserId, period, limit);
    return rows.map(toUsageRow);
  }

  async listForApp(appId: string, fromMs: number, toMs: number, limit: number, after?: UsageCursor): Promise<UsageRow[]> {
    const rows = after
      ? this.db
          .query<LedgerRow, [string, number, number, number, number, string, number]>(
            `SELECT * FROM usage_ledger WHERE app_id = ? AND started_at >= ? AND started_at < ?
               AND (started_at > ? OR (started_at = ? AND request_id > ?))
             ORDER BY started_at, request_id LIMIT ?`,
          )
          .all(appId, fromMs, toMs, after.startedAt, after.startedAt, after.requestId, limit)
      : this.db
          .query<LedgerRow, [string, number, number, number]>(
            `SELECT * FROM usage_ledger WHERE app_id = ? AND started_at >= ? AND started_at < ? ORDER BY started_at, request_id LIMIT ?`,
          )
          .all(appId, fromMs, toMs, limit);
    return rows.map(toUsageRow);
  }

  async find(requestId: string): Promise<UsageRow | null> {
    const row = this.db.query<LedgerRow, [string]>("SELECT * FROM usage_ledger WHERE request_id = ?").get(requestId);
    return row ? toUsageRow(row) : null;
  }
}
