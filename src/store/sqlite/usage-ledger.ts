import type { Database } from "bun:sqlite";
import { repeated, ROWS_PER_STATEMENT, StatementsByRows } from "./statements-by-rows";
import type { UsageCursor, UsageLedgerRepository } from "../usage-ledger";
import type { UsageRow, UsageSource } from "../../budget/usage-row";
import { grantDayAccount } from "../../budget/accounts";

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

const LEDGER_COLUMNS = `request_id, account, app_id, app_user_id, grant_id, period, model, generation_id, prompt_tokens,
  completion_tokens, cost_nano, source, status, streamed, started_at, finished_at, reserved_nano, overrun_nano`;
const PLACEHOLDERS = `(${repeated("?", 18)})`;

type LedgerValue = string | number | null;

/** One row's values, in LEDGER_COLUMNS order. */
function pushValues(out: LedgerValue[], r: UsageRow): void {
  out.push(
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
}

/** What a batch adds to one account's totals. */
interface TotalsDelta {
  spentNano: number;
  requests: number;
  frozenCapNano: number | null;
}

/**
 * The INSERT of `rows` rows at once. ON CONFLICT, not OR IGNORE: only a replay (the same
 * request id) is skipped; OR IGNORE would also drop a row that breaks a CHECK, without a word.
 * No RETURNING: naming every row inserted was 3–31 % of a batch's CPU, and a statement's
 * count of changes says whether it skipped any (ARCHITECTURE.md §7 "Rows inserted, counted").
 */
const insertSql = (rows: number) => `INSERT INTO usage_ledger (${LEDGER_COLUMNS}) VALUES ${repeated(PLACEHOLDERS, rows)} ON CONFLICT (request_id) DO NOTHING`;

/**
 * Adds a batch's deltas to `rows` accounts' totals: (account, spent, requests, frozen cap)
 * per account. The frozen cap only ever rises, so a batch's largest stands for all of its
 * rows. One statement for many accounts: with many users, one per account was a
 * microsecond of a row's five (ARCHITECTURE.md §7 "Totals and journal deletes per statement").
 */
const addToTotalsSql = (rows: number) =>
  `INSERT INTO usage_totals (account, spent_nano, request_count, frozen_cap_nano)
   VALUES ${repeated("(?, ?, ?, ?)", rows)}
   ON CONFLICT (account) DO UPDATE SET spent_nano = spent_nano + excluded.spent_nano, request_count = request_count + excluded.request_count,
     frozen_cap_nano = CASE WHEN excluded.frozen_cap_nano IS NULL THEN frozen_cap_nano ELSE MAX(COALESCE(frozen_cap_nano, 0), excluded.frozen_cap_nano) END`;

/** A call whose row is written is no longer in flight (src/store/call-journal.ts): `rows` entries at once. */
const closeJournalSql = (rows: number) => `DELETE FROM call_journal WHERE request_id IN (${repeated("?", rows)})`;

/** The condition that pages back from a listing's cursor: ?5 started_at, ?6 request id. */
export const LIST_BEFORE_CURSOR = "AND (started_at < ?5 OR (started_at = ?5 AND request_id < ?6))";

/**
 * A user's rows, newest first: ?1 app, ?2 user, ?3 period, ?4 limit; `cursor` is "" or
 * LIST_BEFORE_CURSOR.
 *
 * The tail is read by rowid from the mark on, NOT INDEXED: the mark is a subquery the
 * planner cannot see, and it chose the app's time index instead, which reads every row the
 * app ever wrote, on the event loop: 109 ms at 1,000,000 rows, against 0.40 by rowid with a
 * tail of 1,000 (ARCHITECTURE.md §7 "Tail read by rowid").
 */
export const listForUserSql = (cursor: string) => `
  SELECT * FROM (
    SELECT * FROM (
      SELECT l.* FROM user_index.usage_ledger_by_user u JOIN usage_ledger l ON l.request_id = u.request_id
      WHERE u.app_id = ?1 AND u.app_user_id = ?2 AND u.period = ?3 ${cursor.replaceAll("started_at", "u.started_at").replaceAll("request_id", "u.request_id")}
      ORDER BY u.started_at DESC, u.request_id DESC LIMIT ?4
    )
    UNION
    SELECT * FROM usage_ledger NOT INDEXED
    WHERE rowid > (SELECT upto FROM user_index.usage_ledger_by_user_mark) AND app_id = ?1 AND app_user_id = ?2 AND period = ?3 ${cursor}
  )
  ORDER BY started_at DESC, request_id DESC LIMIT ?4`;

export class SqliteUsageLedgerRepository implements UsageLedgerRepository {
  private readonly inserts;
  private readonly addToTotals;
  private readonly closeJournal;
  private readonly writeBatch;
  private readonly listForUserFirst;
  private readonly listForUserBefore;

  constructor(
    private readonly db: Database,
    /** The connection with the per-user index attached (./user-index.ts). */
    userIndexReader: Database,
  ) {
    this.listForUserFirst = userIndexReader.query<LedgerRow, [string, string, string, number]>(listForUserSql(""));
    this.listForUserBefore = userIndexReader.query<LedgerRow, [string, string, string, number, number, string]>(listForUserSql(LIST_BEFORE_CURSOR));
    this.inserts = new StatementsByRows(db, insertSql);
    this.addToTotals = new StatementsByRows(db, addToTotalsSql);
    this.closeJournal = new StatementsByRows(db, closeJournalSql);
    const lastRowid = db.query<{ last: number }, []>("SELECT COALESCE(max(rowid), 0) AS last FROM usage_ledger");
    const insertedAfter = db.query<{ request_id: string }, [number]>("SELECT request_id FROM usage_ledger WHERE rowid > ?");
    // One transaction per batch. A row already present (a replay) is ignored, and only the
    // rows really inserted are added to the totals. When every statement inserted all of its
    // rows, that is every row; when one skipped some, the rows this transaction added are
    // read back: rowids only grow (rows are never deleted, and a new row takes one past the
    // largest), and no other connection writes until it commits.
    this.writeBatch = db.transaction((rows: UsageRow[]) => {
      const before = lastRowid.get()!.last;
      let skipped = false;
      const values: LedgerValue[] = [];
      for (let at = 0; at < rows.length; at += ROWS_PER_STATEMENT) {
        const slice = rows.slice(at, at + ROWS_PER_STATEMENT);
        values.length = 0;
        for (const r of slice) pushValues(values, r);
        if (this.inserts.for(slice.length).run(...values).changes !== slice.length) skipped = true;
      }
      const inserted = skipped ? new Set(insertedAfter.all(before).map((r) => r.request_id)) : null;
      const deltas = new Map<string, TotalsDelta>();
      const add = (account: string, r: UsageRow, frozenCapNano: number | null) => {
        const delta = deltas.get(account) ?? { spentNano: 0, requests: 0, frozenCapNano: null };
        delta.spentNano += r.costNano;
        delta.requests++;
        if (frozenCapNano !== null) delta.frozenCapNano = Math.max(delta.frozenCapNano ?? 0, frozenCapNano);
        deltas.set(account, delta);
      };
      let count = 0;
      for (const r of rows) {
        if (inserted && !inserted.delete(r.requestId)) continue;
        count++;
        add(r.account, r, r.frozenCapNano ?? null);
        // A grant's spend also counts toward its app's daily ceiling on grants, and its
        // overrun of the ceiling's reservation freezes that day.
        if (r.grantId !== null) add(grantDayAccount(r.appId, r.startedAt), r, r.dayFrozenCapNano ?? null);
      }
      const totals = [...deltas];
      for (let at = 0; at < totals.length; at += ROWS_PER_STATEMENT) {
        const slice = totals.slice(at, at + ROWS_PER_STATEMENT);
        values.length = 0;
        for (const [account, delta] of slice) values.push(account, delta.spentNano, delta.requests, delta.frozenCapNano);
        this.addToTotals.for(slice.length).run(...values);
      }
      // A call whose row is written is no longer in flight (src/store/call-journal.ts).
      for (let at = 0; at < rows.length; at += ROWS_PER_STATEMENT) {
        const slice = rows.slice(at, at + ROWS_PER_STATEMENT);
        this.closeJournal.for(slice.length).run(...slice.map((r) => r.requestId));
      }
      return count;
    });
  }

  async insertBatch(rows: UsageRow[]): Promise<number> {
    return this.writeBatch.immediate(rows) as number;
  }

  /**
   * A user's rows: those the per-user index has (./user-index.ts), and those of the tail it has
   * not reached yet (./maintenance-worker.ts), found by scanning the tail. UNION, not UNION
   * ALL: the thread writes a tail's entries over several transactions and moves the mark
   * with the last, so a row can be in the index and in the tail at once; it is listed once.
   */
  async listForUser(appId: string, appUserId: string, period: string, limit: number, before?: UsageCursor): Promise<UsageRow[]> {
    const rows = before
      ? this.listForUserBefore.all(appId, appUserId, period, limit, before.startedAt, before.requestId)
      : this.listForUserFirst.all(appId, appUserId, period, limit);
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
