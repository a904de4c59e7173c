import type { UsageCursor, UsageLedgerRepository, UsageRow, UsageSource } from "../usage-ledger";
import { num, numOrNull, type PostgresDatabase } from "./database";

type Row = Record<string, unknown>;

/** The row as the usage_ledger table has it (also what budget_settle takes as jsonb). */
export function ledgerRecord(r: UsageRow) {
  return {
    request_id: r.requestId,
    account: r.account,
    app_id: r.appId,
    app_user_id: r.appUserId,
    grant_id: r.grantId,
    period: r.period,
    model: r.model,
    generation_id: r.generationId,
    prompt_tokens: r.promptTokens,
    completion_tokens: r.completionTokens,
    cost_nano: r.costNano,
    source: r.source,
    status: r.status,
    streamed: r.streamed,
    started_at: r.startedAt,
    finished_at: r.finishedAt,
    reserved_nano: r.reservedNano ?? null,
    overrun_nano: r.overrunNano ?? 0,
  };
}

const toUsageRow = (r: Row): UsageRow => ({
  requestId: String(r.request_id),
  account: String(r.account),
  appId: String(r.app_id),
  appUserId: (r.app_user_id as string | null) ?? null,
  grantId: (r.grant_id as string | null) ?? null,
  period: String(r.period),
  model: String(r.model),
  generationId: (r.generation_id as string | null) ?? null,
  promptTokens: num(r.prompt_tokens),
  completionTokens: num(r.completion_tokens),
  costNano: num(r.cost_nano),
  source: r.source as UsageSource,
  status: String(r.status),
  streamed: r.streamed === true,
  startedAt: num(r.started_at),
  finishedAt: num(r.finished_at),
  reservedNano: numOrNull(r.reserved_nano),
  overrunNano: num(r.overrun_nano),
});

export class PostgresUsageLedgerRepository implements UsageLedgerRepository {
  constructor(private readonly db: PostgresDatabase) {}

  /**
   * One transaction per batch: a multi-row INSERT (rows already there are skipped, so a
   * replayed batch changes nothing), then the totals of the accounts whose rows were new,
   * in account order so that two instances' batches lock them in the same order.
   */
  async insertBatch(rows: UsageRow[]): Promise<number> {
    if (rows.length === 0) return 0;
    const byId = new Map(rows.map((r) => [r.requestId, r]));
    return this.db.run((sql) =>
      sql.begin(async (tx) => {
        const inserted: Row[] = await tx`INSERT INTO usage_ledger ${tx(rows.map(ledgerRecord))} ON CONFLICT (request_id) DO NOTHING RETURNING request_id`;
        const totals = new Map<string, { spent: number; count: number; frozen: number }>();
        for (const { request_id } of inserted) {
          const r = byId.get(String(request_id))!;
          const t = totals.get(r.account) ?? { spent: 0, count: 0, frozen: -1 };
          t.spent += r.costNano;
          t.count += 1;
          t.frozen = Math.max(t.frozen, r.frozenCapNano ?? -1);
          totals.set(r.account, t);
        }
        if (totals.size === 0) return 0;
        const accounts = [...totals.keys()].sort();
        const list = (pick: (t: { spent: number; count: number; frozen: number }) => number) => accounts.map((a) => String(pick(totals.get(a)!)));
        await tx`INSERT INTO usage_totals (account, spent_nano, request_count, frozen_cap_nano)
          SELECT a, s, n, NULLIF(f, -1) FROM unnest(${tx.array(accounts, "TEXT")}::text[], ${tx.array(list((t) => t.spent), "TEXT")}::bigint[],
            ${tx.array(list((t) => t.count), "TEXT")}::bigint[], ${tx.array(list((t) => t.frozen), "TEXT")}::bigint[]) AS u(a, s, n, f)
          ORDER BY a
          ON CONFLICT (account) DO UPDATE SET
            spent_nano = usage_totals.spent_nano + EXCLUDED.spent_nano,
            request_count = usage_totals.request_count + EXCLUDED.request_count,
            frozen_cap_nano = CASE WHEN EXCLUDED.frozen_cap_nano IS NULL THEN usage_totals.frozen_cap_nano
                                   ELSE GREATEST(COALESCE(usage_totals.frozen_cap_nano, 0), EXCLUDED.frozen_cap_nano) END`;
        return inserted.length;
      }),
    );
  }

  async listForUser(appId: string, appUserId: string, period: string, limit: number, before?: UsageCursor): Promise<UsageRow[]> {
    const rows: Row[] = await this.db.run((sql) =>
      before
        ? sql`SELECT * FROM usage_ledger WHERE app_id = ${appId} AND app_user_id = ${appUserId} AND period = ${period}
            AND (started_at, request_id) < (${before.startedAt}, ${before.requestId})
            ORDER BY started_at DESC, request_id DESC LIMIT ${limit}`
        : sql`SELECT * FROM usage_ledger WHERE app_id = ${appId} AND app_user_id = ${appUserId} AND period = ${period}
            ORDER BY started_at DESC, request_id DESC LIMIT ${limit}`,
    );
    return rows.map(toUsageRow);
  }

  async find(requestId: string): Promise<UsageRow | null> {
    const [row] = await this.db.run((sql) => sql`SELECT * FROM usage_ledger WHERE request_id = ${requestId}`);
    return row ? toUsageRow(row) : null;
  }
}
