import type { Database } from "bun:sqlite";
import { repeated, ROWS_PER_STATEMENT, StatementsByRows } from "./statements-by-rows";
import type { CallJournalRepository, ClaimedEntry, InstanceLeaseRepository, JournalChanges, JournalEntry } from "../call-journal";

interface JournalRow {
  request_id: string;
  owner: string;
  account: string;
  ceiling_reservation: string | null;
  ceiling_reserved_nano: number | null;
  ceiling_cap_nano: number | null;
  app_id: string;
  app_user_id: string | null;
  grant_id: string | null;
  payer: string;
  period: string;
  model: string;
  streamed: number;
  started_at: number;
  reserved_nano: number;
  cap_nano: number;
  generation_id: string | null;
  reconcile_reason: string | null;
  attempts: number;
  /** Migration 15: null while the call runs. */
  reconciling_since: number | null;
}

const toEntry = (r: JournalRow): JournalEntry => ({
  requestId: r.request_id,
  owner: r.owner,
  account: r.account,
  ceilingReservationId: r.ceiling_reservation,
  ceilingReservedNano: r.ceiling_reserved_nano,
  ceilingCapNano: r.ceiling_cap_nano,
  appId: r.app_id,
  appUserId: r.app_user_id,
  grantId: r.grant_id,
  payer: r.payer === "user" ? "user" : "app",
  period: r.period,
  model: r.model,
  streamed: r.streamed === 1,
  startedAt: r.started_at,
  reservedNano: r.reserved_nano,
  capNano: r.cap_nano,
  generationId: r.generation_id,
  reconcileReason: r.reconcile_reason,
  attempts: r.attempts,
});

/** An owner that is not this one and whose lease (wall time, ms) lapsed or never was. */
const ORPHANED = "owner <> ?1 AND NOT EXISTS (SELECT 1 FROM proxy_instances i WHERE i.id = call_journal.owner AND i.lease_until >= ?2)";

/** The entries a turn opens, `rows` at once; an entry already there (the same request id) is kept as it is. */
const openSql = (rows: number) =>
  `INSERT OR IGNORE INTO call_journal (request_id, owner, account, ceiling_reservation, app_id, app_user_id, grant_id, period, model,
     streamed, started_at, reserved_nano, cap_nano, generation_id, reconcile_reason, attempts, payer, ceiling_reserved_nano, ceiling_cap_nano)
   VALUES ${repeated(`(${repeated("?", 19)})`, rows)}`;

type JournalValue = string | number | null;

/** One entry's values, in openSql's column order. */
function pushValues(out: JournalValue[], e: JournalEntry): void {
  out.push(
    e.requestId,
    e.owner,
    e.account,
    e.ceilingReservationId,
    e.appId,
    e.appUserId,
    e.grantId,
    e.period,
    e.model,
    e.streamed ? 1 : 0,
    e.startedAt,
    e.reservedNano,
    e.capNano,
    e.generationId,
    e.reconcileReason,
    e.attempts,
    e.payer,
    e.ceilingReservedNano,
    e.ceilingCapNano,
  );
}

export class SqliteCallJournalRepository implements CallJournalRepository {
  private readonly opens;
  private readonly recordBatch;

  constructor(private readonly db: Database) {
    this.opens = new StatementsByRows(db, openSql);
    const identify = db.query("UPDATE call_journal SET generation_id = ? WHERE request_id = ?");
    this.recordBatch = db.transaction((changes: JournalChanges) => {
      const values: JournalValue[] = [];
      for (let at = 0; at < changes.open.length; at += ROWS_PER_STATEMENT) {
        const slice = changes.open.slice(at, at + ROWS_PER_STATEMENT);
        values.length = 0;
        for (const e of slice) pushValues(values, e);
        this.opens.for(slice.length).run(...values);
      }
      for (const { requestId, generationId } of changes.identify) identify.run(generationId, requestId);
    });
  }

  async record(changes: JournalChanges): Promise<void> {
    if (changes.open.length + changes.identify.length > 0) this.recordBatch.immediate(changes);
  }

  async toReconcile(requestId: string, reason: string, generationId: string | null, at: number): Promise<void> {
    this.db
      .query(
        `UPDATE call_journal SET reconcile_reason = ?1, generation_id = COALESCE(?2, generation_id), next_attempt_at = ?3,
           reconciling_since = COALESCE(reconciling_since, ?3) WHERE request_id = ?4`,
      )
      .run(reason, generationId, at, requestId);
  }

  async claimDue(owner: string, now: number, limit: number, leaseMs: number, orphanReason: string, orphansToo = true): Promise<ClaimedEntry[]> {
    return this.db
      .transaction(() => {
        const rows = this.db
          .query<JournalRow, [string, number, number, number, number]>(
            `SELECT * FROM call_journal
             WHERE (owner = ?1 AND next_attempt_at <= ?3) OR (?5 = 1 AND ${ORPHANED})
             ORDER BY COALESCE(next_attempt_at, 0), request_id LIMIT ?4`,
          )
          .all(owner, Date.now(), now, limit, orphansToo ? 1 : 0);
        const take = this.db.query(
          `UPDATE call_journal SET owner = ?, next_attempt_at = ?, reconcile_reason = COALESCE(reconcile_reason, ?),
             reconciling_since = COALESCE(reconciling_since, ?) WHERE request_id = ?`,
        );
        for (const r of rows) take.run(owner, now + leaseMs, orphanReason, now, r.request_id);
        return rows.map((r) => ({
          ...toEntry({ ...r, owner, reconcile_reason: r.reconcile_reason ?? orphanReason }),
          reconcilingSince: r.reconciling_since ?? now,
        }));
      })
      .immediate();
  }

  async retryLater(requestId: string, owner: string, attempts: number, at: number): Promise<void> {
    this.db.query("UPDATE call_journal SET attempts = ?, next_attempt_at = ? WHERE request_id = ? AND owner = ?").run(attempts, at, requestId, owner);
  }

  async ownedBy(owner: string): Promise<JournalEntry[]> {
    return this.db.query<JournalRow, [string]>("SELECT * FROM call_journal WHERE owner = ? ORDER BY request_id").all(owner).map(toEntry);
  }

  async notOwnedBy(owner: string): Promise<JournalEntry[]> {
    return this.db.query<JournalRow, [string]>("SELECT * FROM call_journal WHERE owner <> ? ORDER BY request_id").all(owner).map(toEntry);
  }

  async find(requestId: string): Promise<JournalEntry | null> {
    const row = this.db.query<JournalRow, [string]>("SELECT * FROM call_journal WHERE request_id = ?").get(requestId);
    return row ? toEntry(row) : null;
  }

  async journaled(reservationIds: string[]): Promise<Set<string>> {
    const found = new Set<string>();
    const lookup = this.db.query<{ n: number }, [string, string]>("SELECT count(*) AS n FROM call_journal WHERE request_id = ? OR ceiling_reservation = ?");
    for (const id of reservationIds) if (lookup.get(id, id)!.n > 0) found.add(id);
    return found;
  }

  async counts(): Promise<{ running: number; reconciling: number }> {
    const row = this.db
      .query<{ running: number; reconciling: number }, []>(
        "SELECT COALESCE(SUM(reconcile_reason IS NULL), 0) AS running, COALESCE(SUM(reconcile_reason IS NOT NULL), 0) AS reconciling FROM call_journal",
      )
      .get()!;
    return { running: row.running, reconciling: row.reconciling };
  }
}

export class SqliteInstanceLeaseRepository implements InstanceLeaseRepository {
  constructor(private readonly db: Database) {}

  async renew(id: string, leaseMs: number): Promise<void> {
    this.db
      .query("INSERT INTO proxy_instances (id, lease_until) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET lease_until = excluded.lease_until")
      .run(id, Date.now() + leaseMs);
  }

  async drop(id: string): Promise<void> {
    this.db.query("DELETE FROM proxy_instances WHERE id = ?").run(id);
  }
}
