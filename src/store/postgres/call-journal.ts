import type { CallJournalRepository, ClaimedEntry, InstanceLeaseRepository, JournalChanges, JournalEntry } from "../call-journal";
import { CallBatcher } from "../call-batcher";
import { num, numOrNull, type PostgresDatabase } from "./database";

type Row = Record<string, unknown>;

const toEntry = (r: Row): JournalEntry => ({
  requestId: String(r.request_id),
  owner: String(r.owner),
  account: String(r.account),
  ceilingReservationId: (r.ceiling_reservation as string | null) ?? null,
  ceilingReservedNano: numOrNull(r.ceiling_reserved_nano),
  ceilingCapNano: numOrNull(r.ceiling_cap_nano),
  appId: String(r.app_id),
  appUserId: (r.app_user_id as string | null) ?? null,
  grantId: (r.grant_id as string | null) ?? null,
  // Null on an entry opened by an instance from before migration 13 (still running through a
  // rolling start): every call of such an instance was paid by the operator's key.
  payer: r.payer === "user" ? "user" : "app",
  period: String(r.period),
  model: String(r.model),
  streamed: r.streamed === true,
  startedAt: num(r.started_at),
  reservedNano: num(r.reserved_nano),
  capNano: num(r.cap_nano),
  generationId: (r.generation_id as string | null) ?? null,
  reconcileReason: (r.reconcile_reason as string | null) ?? null,
  attempts: num(r.attempts),
});

const toRecord = (e: JournalEntry) => ({
  request_id: e.requestId,
  owner: e.owner,
  account: e.account,
  ceiling_reservation: e.ceilingReservationId,
  ceiling_reserved_nano: e.ceilingReservedNano,
  ceiling_cap_nano: e.ceilingCapNano,
  app_id: e.appId,
  app_user_id: e.appUserId,
  grant_id: e.grantId,
  period: e.period,
  model: e.model,
  streamed: e.streamed,
  started_at: e.startedAt,
  reserved_nano: e.reservedNano,
  cap_nano: e.capNano,
  generation_id: e.generationId,
  reconcile_reason: e.reconcileReason,
  attempts: e.attempts,
  next_attempt_at: null,
  payer: e.payer,
});

/**
 * The journal on PostgreSQL. Opens that arrive while the previous batch is under way go
 * together in the next (CallBatcher, as the budget ledger's reserves do): a call about to go
 * upstream waits for one round trip, whatever the load. Generation ids go the same way: a
 * stream's first byte waits for one round trip, shared with the streams that learned theirs
 * meanwhile (one statement per event-loop turn made them the most frequent statement under
 * load). Without Redis, opens come with the reservations instead (BudgetLedger.journalsCalls).
 */
export class PostgresCallJournalRepository implements CallJournalRepository {
  private readonly opens = new CallBatcher<JournalEntry, void>(async (entries) => {
    await this.db.run((sql) => sql`SELECT call_journal_open(${JSON.stringify(entries.map(toRecord))}::text::jsonb)`);
    return new Array<void>(entries.length).fill(undefined);
  }, 256);

  private readonly identifies = new CallBatcher<JournalChanges["identify"][number], void>(async (ids) => {
    await this.identify(ids);
    return new Array<void>(ids.length).fill(undefined);
  }, 256);

  constructor(private readonly db: PostgresDatabase) {}

  /** Opens and identifications, each kind batched (CallBatcher), side by side. */
  async record(changes: JournalChanges): Promise<void> {
    await Promise.all([...changes.open.map((e) => this.opens.call(e)), ...changes.identify.map((i) => this.identifies.call(i))]);
  }

  private async identify(ids: JournalChanges["identify"]): Promise<void> {
    await this.db.run((sql) => {
      const requests = sql.array(
        ids.map((i) => i.requestId),
        "TEXT" as never,
      );
      const generations = sql.array(
        ids.map((i) => i.generationId),
        "TEXT" as never,
      );
      // A function, so that its plan reads each entry by key (migration 18).
      return sql`SELECT call_journal_identify(${requests}::text[], ${generations}::text[])`;
    });
  }

  async toReconcile(requestId: string, reason: string, generationId: string | null, at: number): Promise<void> {
    await this.db.run(
      (sql) => sql`UPDATE call_journal SET reconcile_reason = ${reason}, generation_id = COALESCE(${generationId}, generation_id), next_attempt_at = ${at},
          reconciling_since = COALESCE(reconciling_since, ${at})
        WHERE request_id = ${requestId}`,
    );
  }

  /** SKIP LOCKED: reconcilers of several instances share the due entries instead of queueing on them. */
  async claimDue(owner: string, now: number, limit: number, leaseMs: number, orphanReason: string, orphansToo = true): Promise<ClaimedEntry[]> {
    const rows: Row[] = await this.db.run(
      (sql) => sql`
        UPDATE call_journal j SET owner = ${owner}, next_attempt_at = ${now + leaseMs}, reconcile_reason = COALESCE(j.reconcile_reason, ${orphanReason}),
          reconciling_since = COALESCE(j.reconciling_since, ${now})
        WHERE j.request_id IN (
          SELECT c.request_id FROM call_journal c
          WHERE (c.owner = ${owner} AND c.next_attempt_at <= ${now})
             OR (${orphansToo} AND c.owner <> ${owner} AND NOT EXISTS (SELECT 1 FROM proxy_instances i WHERE i.id = c.owner AND i.lease_until >= clock_timestamp()))
          ORDER BY COALESCE(c.next_attempt_at, 0), c.request_id
          LIMIT ${limit}
          FOR UPDATE SKIP LOCKED)
        RETURNING j.*`,
    );
    return rows.map((r) => ({ ...toEntry(r), reconcilingSince: num(r.reconciling_since) }));
  }

  async retryLater(requestId: string, owner: string, attempts: number, at: number): Promise<void> {
    await this.db.run(
      (sql) => sql`UPDATE call_journal SET attempts = ${attempts}, next_attempt_at = ${at} WHERE request_id = ${requestId} AND owner = ${owner}`,
    );
  }

  async ownedBy(owner: string): Promise<JournalEntry[]> {
    const rows: Row[] = await this.db.run((sql) => sql`SELECT * FROM call_journal WHERE owner = ${owner} ORDER BY request_id`);
    return rows.map(toEntry);
  }

  async notOwnedBy(owner: string): Promise<JournalEntry[]> {
    const rows: Row[] = await this.db.run((sql) => sql`SELECT * FROM call_journal WHERE owner <> ${owner} ORDER BY request_id`);
    return rows.map(toEntry);
  }

  async find(requestId: string): Promise<JournalEntry | null> {
    const [row] = await this.db.run((sql) => sql`SELECT * FROM call_journal WHERE request_id = ${requestId}`);
    return row ? toEntry(row) : null;
  }

  async journaled(reservationIds: string[]): Promise<Set<string>> {
    if (reservationIds.length === 0) return new Set();
    const rows: Row[] = await this.db.run((sql) => {
      const ids = sql.array(reservationIds, "TEXT" as never);
      return sql`SELECT request_id AS id FROM call_journal WHERE request_id = ANY(${ids}::text[])
        UNION SELECT ceiling_reservation FROM call_journal WHERE ceiling_reservation = ANY(${ids}::text[])`;
    });
    return new Set(rows.map((r) => String(r.id)));
  }

  async counts(): Promise<{ running: number; reconciling: number }> {
    const [row] = await this.db.run(
      (sql) =>
        sql`SELECT count(*) FILTER (WHERE reconcile_reason IS NULL) AS running, count(*) FILTER (WHERE reconcile_reason IS NOT NULL) AS reconciling FROM call_journal`,
    );
    return { running: num(row.running), reconciling: num(row.reconciling) };
  }
}

/** The same table the budget ledger's leases were in (proxy_instances, migration 3), in the database's own time. */
export class PostgresInstanceLeaseRepository implements InstanceLeaseRepository {
  constructor(private readonly db: PostgresDatabase) {}

  async renew(id: string, leaseMs: number): Promise<void> {
    await this.db.run(
      (sql) => sql`INSERT INTO proxy_instances (id, lease_until) VALUES (${id}, clock_timestamp() + ${`${leaseMs} milliseconds`}::interval)
        ON CONFLICT (id) DO UPDATE SET lease_until = EXCLUDED.lease_until`,
    );
  }

  async drop(id: string): Promise<void> {
    await this.db.run((sql) => sql`DELETE FROM proxy_instances WHERE id = ${id}`);
  }
}
