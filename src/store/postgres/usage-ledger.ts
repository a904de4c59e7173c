import type { UsageCursor, UsageLedgerRepository } from "../usage-ledger";
import type { UsageRow, UsageSource } from "../../budget/usage-row";
import { num, numOrNull, type PostgresDatabase } from "./database";
import { grantDayAccount } from "../../budget/accounts";

type Row = Record<string, unknown>;

/** The row as the usage_ledger table has it (also what budget_settle_many takes as jsonb, per settle). */
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

/** (app_id, app_user_id, period, started_at): usage_ledger_by_user's key; a grant's row (no user) first. */
function inUserIndexOrder(a: UsageRow, b: UsageRow): number {
  if (a.appId !== b.appId) return a.appId < b.appId ? -1 : 1;
  if (a.appUserId !== b.appUserId) return a.appUserId === null ? -1 : b.appUserId === null ? 1 : a.appUserId < b.appUserId ? -1 : 1;
  if (a.period !== b.period) return a.period < b.period ? -1 : 1;
  return a.startedAt - b.startedAt;
}

const isCap = (cap: number | null | undefined) => cap !== null && cap !== undefined;

/** The error of a plain INSERT that met a row already in the ledger (unique_violation on its key). */
function isLedgerKeyTaken(err: unknown): boolean {
  const e = err as { errno?: unknown; constraint?: unknown } | null;
  return e?.errno === "23505" && e.constraint === "usage_ledger_pkey";
}

export class PostgresUsageLedgerRepository implements UsageLedgerRepository {
  constructor(private readonly db: PostgresDatabase) {}

  /**
   * One statement per batch, so one round trip and one implicit transaction: the rows go in
   * as one array per column (unnest), which keeps the statement the same size whatever the
   * batch (a VALUES list has a parameter per cell: 18 per row, slow to parse and capped at
   * 65,535). Rows already there are skipped, so a replayed batch changes nothing; the totals
   * of the accounts whose rows were new are added in account order, so that two
   * instances' batches lock them in the same order.
   *
   * A batch is first written as all new: ON CONFLICT DO NOTHING looks each row's key up
   * before inserting it, a second walk down the primary key that a plain INSERT's own
   * uniqueness check makes unneeded (about a tenth of the server's CPU per row, ARCHITECTURE.md
   * §7 "PostgreSQL ledger rows inserted as new"). A replay (a retried batch whose commit
   * had landed, or a row another instance wrote at the same time) fails on the key as a
   * whole, and is written again skipping what is there; the server logs that failure as an
   * ERROR line (duplicate key on usage_ledger_pkey), which is expected and harmless.
   */
  async insertBatch(batch: UsageRow[]): Promise<number> {
    if (batch.length === 0) return 0;
    // A request id twice in one batch (a repeated finish) would be joined twice below.
    // In the order of usage_ledger_by_user: with many users, each row goes to another leaf of
    // that index, and in its order the server walks them one after the next instead of at
    // random (measured: ARCHITECTURE.md §7 "PostgreSQL ledger batches in index order").
    const rows = [...new Map(batch.map((r) => [r.requestId, r])).values()].sort(inUserIndexOrder);
    // Overruns are rare: their caps (the account's, and a grant's day's) travel apart, so the
    // common batch joins nothing.
    const frozen = rows.filter((r) => isCap(r.frozenCapNano) || isCap(r.dayFrozenCapNano));
    try {
      return await this.writeBatch(rows, frozen, false);
    } catch (err) {
      if (!isLedgerKeyTaken(err)) throw err;
      return await this.writeBatch(rows, frozen, true);
    }
  }

  /** `rows`: distinct request ids, in the per-user index's order; `frozen`: those that carry a cap. */
  private async writeBatch(rows: UsageRow[], frozen: UsageRow[], skipExisting: boolean): Promise<number> {
    const column = <T>(pick: (r: UsageRow) => T) => rows.map(pick);
    const capText = (cap: number | null | undefined) => (isCap(cap) ? String(cap) : null);
    const text = (pick: (r: UsageRow) => string | number | null) =>
      column((r) => {
        const v = pick(r);
        return v === null ? null : String(v);
      });
    const [result] = await this.db.run((sql) => {
      const a = (values: unknown[], type: string) => sql.array(values, type as never);
      return sql`
        WITH src AS (
          SELECT * FROM unnest(
            ${a(
              column((r) => r.requestId),
              "TEXT",
            )}::text[], ${a(
              column((r) => r.account),
              "TEXT",
            )}::text[],
            ${a(
              column((r) => r.appId),
              "TEXT",
            )}::text[], ${a(
              column((r) => r.appUserId),
              "TEXT",
            )}::text[],
            ${a(
              column((r) => r.grantId),
              "TEXT",
            )}::text[], ${a(
              column((r) => r.period),
              "TEXT",
            )}::text[],
            ${a(
              column((r) => r.model),
              "TEXT",
            )}::text[], ${a(
              column((r) => r.generationId),
              "TEXT",
            )}::text[],
            ${a(
              text((r) => r.promptTokens),
              "TEXT",
            )}::bigint[], ${a(
              text((r) => r.completionTokens),
              "TEXT",
            )}::bigint[],
            ${a(
              text((r) => r.costNano),
              "TEXT",
            )}::bigint[], ${a(
              column((r) => r.source),
              "TEXT",
            )}::text[],
            ${a(
              column((r) => r.status),
              "TEXT",
            )}::text[], ${a(
              column((r) => r.streamed),
              "BOOL",
            )}::boolean[],
            ${a(
              text((r) => r.startedAt),
              "TEXT",
            )}::bigint[], ${a(
              text((r) => r.finishedAt),
              "TEXT",
            )}::bigint[],
            ${a(
              text((r) => r.reservedNano ?? null),
              "TEXT",
            )}::bigint[], ${a(
              text((r) => r.overrunNano ?? 0),
              "TEXT",
            )}::bigint[],
            ${a(
              column((r) => (r.grantId === null ? null : grantDayAccount(r.appId, r.startedAt))),
              "TEXT",
            )}::text[]
          ) AS s(request_id, account, app_id, app_user_id, grant_id, period, model, generation_id, prompt_tokens,
                 completion_tokens, cost_nano, source, status, streamed, started_at, finished_at, reserved_nano, overrun_nano, grant_day)
        ), frozen AS (
          SELECT * FROM unnest(${a(
            frozen.map((r) => r.requestId),
            "TEXT",
          )}::text[], ${a(
            frozen.map((r) => capText(r.frozenCapNano)),
            "TEXT",
          )}::bigint[], ${a(
            frozen.map((r) => capText(r.dayFrozenCapNano)),
            "TEXT",
          )}::bigint[]) AS f(request_id, cap, day_cap)
        ), inserted AS (
          INSERT INTO usage_ledger (request_id, account, app_id, app_user_id, grant_id, period, model, generation_id, prompt_tokens,
                                    completion_tokens, cost_nano, source, status, streamed, started_at, finished_at, reserved_nano, overrun_nano)
          SELECT request_id, account, app_id, app_user_id, grant_id, period, model, generation_id, prompt_tokens,
                 completion_tokens, cost_nano, source, status, streamed, started_at, finished_at, reserved_nano, overrun_nano
          FROM src
          ${skipExisting ? sql`ON CONFLICT (request_id) DO NOTHING` : sql``}
          RETURNING request_id, account, cost_nano
        ), charged AS (
          -- Each new row counts for its account and, for a grant's row, toward its app's daily ceiling.
          SELECT i.request_id, i.account, i.cost_nano, f.cap AS frozen FROM inserted i LEFT JOIN frozen f USING (request_id)
          UNION ALL
          SELECT i.request_id, s.grant_day, i.cost_nano, f.day_cap FROM inserted i JOIN src s USING (request_id)
            LEFT JOIN frozen f USING (request_id) WHERE s.grant_day IS NOT NULL
        ), closed AS (
          -- A call whose row is written is no longer in flight (src/store/call-journal.ts).
          -- A function, so that its plan reads each entry by key (migration 18); a SELECT in
          -- WITH runs only if read, so the final SELECT reads it.
          SELECT call_journal_close(ARRAY(SELECT request_id FROM src)) AS n
        ), per_account AS (
          SELECT account, sum(cost_nano) AS spent, count(*) AS n, max(frozen) AS frozen FROM charged GROUP BY account
        ), totals AS (
          INSERT INTO usage_totals (account, spent_nano, request_count, frozen_cap_nano)
          SELECT account, spent, n, frozen FROM per_account ORDER BY account
          ON CONFLICT (account) DO UPDATE SET
            spent_nano = usage_totals.spent_nano + EXCLUDED.spent_nano,
            request_count = usage_totals.request_count + EXCLUDED.request_count,
            frozen_cap_nano = CASE WHEN EXCLUDED.frozen_cap_nano IS NULL THEN usage_totals.frozen_cap_nano
                                   ELSE GREATEST(COALESCE(usage_totals.frozen_cap_nano, 0), EXCLUDED.frozen_cap_nano) END
          RETURNING 1
        )
        SELECT (SELECT count(*)::int FROM inserted) AS inserted, (SELECT n FROM closed) AS closed`;
    });
    return num(result.inserted);
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

  async listForApp(appId: string, fromMs: number, toMs: number, limit: number, after?: UsageCursor): Promise<UsageRow[]> {
    const rows: Row[] = await this.db.run((sql) =>
      after
        ? sql`SELECT * FROM usage_ledger WHERE app_id = ${appId} AND started_at >= ${fromMs} AND started_at < ${toMs}
            AND (started_at, request_id) > (${after.startedAt}, ${after.requestId}) ORDER BY started_at, request_id LIMIT ${limit}`
        : sql`SELECT * FROM usage_ledger WHERE app_id = ${appId} AND started_at >= ${fromMs} AND started_at < ${toMs}
            ORDER BY started_at, request_id LIMIT ${limit}`,
    );
    return rows.map(toUsageRow);
  }

  async find(requestId: string): Promise<UsageRow | null> {
    const [row] = await this.db.run((sql) => sql`SELECT * FROM usage_ledger WHERE request_id = ${requestId}`);
    return row ? toUsageRow(row) : null;
  }
}
