import { num, type PostgresDatabase } from "./database";
import { CallBatcher } from "../call-batcher";
import { ledgerRecord } from "./usage-ledger";
import { PostgresCallJournalRepository } from "./call-journal";
import type { UsageRow } from "../../budget/usage-row";
import type { Logger } from "../../logger";
import type { BudgetAccount } from "../../budget/accounts";
import type { BudgetLedger, BudgetSnapshot, FoldedRateLimit, JournaledCall, ReserveOutcome } from "../../budget/ledger";
import type { CheckItem, PostgresRateLimiter } from "./rate-limiter";

/** How long an instance's reservations survive it without a renewal (Redis uses the same bound). */
const LEASE_MS = 5000;
const RENEW_MS = 1000;
const SWEEP_MS = 2500;
/** Most reserves (or settles) in one transaction: a few hundred rows of JSON at most. */
const MAX_BATCH = 256;

interface ReserveItem {
  account: string;
  request: string;
  cap: number;
  min: number;
  desired: number;
  /** The call's rate-limit check, decided in the same statement (migration 9). */
  check?: CheckItem;
  /** The call's journal entry, opened in the same statement when granted. */
  journal?: JournalColumns;
}

/** call_journal's columns that the reservation does not fill in (the statement adds the rest). */
type JournalColumns = ReturnType<typeof journalColumns>;

function journalColumns(call: JournaledCall) {
  return {
    ceiling_reservation: call.ceilingReservationId,
    ceiling_reserved_nano: call.ceilingReservedNano,
    ceiling_cap_nano: call.ceilingCapNano,
    app_id: call.appId,
    app_user_id: call.appUserId,
    grant_id: call.grantId,
    payer: call.payer,
    period: call.period,
    model: call.model,
    streamed: call.streamed,
    started_at: call.startedAt,
    generation_id: null,
    reconcile_reason: null,
    attempts: 0,
    next_attempt_at: null,
  };
}

interface SettleItem {
  request: string;
  actual: number;
  row: Record<string, unknown> | null;
}

/**
 * Budgets kept in PostgreSQL itself, for instances that share only the database (no Redis).
 * Reserves, and settles, go to the database in batches: those that arrive while the
 * previous batch of them is under way go together in the next (CallBatcher; migration 7's
 * budget_reserve_many and budget_settle_many, ../store/postgres/budgets-batch-sql.ts).
 * Each is its own step against the counters, in order, with the account's usage_totals
 * row locked for the batch, so reserves from every instance on one account queue there
 * and the cap holds exactly; the row is written and committed once per batch, not once per
 * call. Settling writes the ledger rows in the same transaction, so the durable totals and
 * the live counters are one and the same: nothing to rebuild, nothing counted twice, no
 * row waiting in a queue to be lost.
 *
 * Given the PostgreSQL rate limiter of the same database, a chat call's rate-limit check
 * goes in its reservation's statement (migration 9's budget_reserve_limited_many,
 * ../store/postgres/reserve-limited-batch-sql.ts, run by migration 22's budget_reserve_durable,
 * ./durable-reserve-sql.ts): one round trip before the upstream instead of two, as with Redis. The call's journal entry goes in that statement too
 * (`journalsCalls`): one round trip in all before the upstream.
 *
 * Each instance renews a lease; every instance sweeps now and then and releases the
 * reservations of instances whose lease ran out (died without settling) whose calls never
 * went upstream (no journal entry); a journaled one stays held until the reconciler settles
 * it from the upstream's record (src/metering/reconciler.ts). A settle that fails (the
 * database is away) is retried in the background with its row.
 */
export class PostgresBudgetLedger implements BudgetLedger {
  readonly kind = "postgres";
  readonly recordsRows = true;
  readonly journalsCalls = true;
  private readonly retrying = new Map<string, { actualNano: number; row: UsageRow | null }>();
  private readonly timers: Array<ReturnType<typeof setInterval>> = [];
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private readonly reserves = new CallBatcher<ReserveItem, ReserveOutcome | Error>((items) => this.reserveMany(items), MAX_BATCH);
  private readonly settles = new CallBatcher<SettleItem, void>((items) => this.settleMany(items), MAX_BATCH);
  /** Where a failed settle's generation id goes (identifyInJournal): the store's own journal statements. */
  private readonly journal: PostgresCallJournalRepository;

  constructor(
    private readonly db: PostgresDatabase,
    private readonly logger: Logger,
    private readonly rateLimiter?: PostgresRateLimiter,
    /**
     * This process's instance id. Its lease (proxy_instances) is the one its journal entries
     * are judged by too: the ledger keeps it, so nothing else needs to.
     */
    readonly instanceId: string = crypto.randomUUID(),
    /** Told of each renewal of that lease (src/metering/lease-continuity.ts). */
    private readonly leaseRenewed: (ok: boolean) => void = () => {},
  ) {
    this.journal = new PostgresCallJournalRepository(db);
  }

  /** Registers the lease before the first reservation, then renews and sweeps in the background. */
  async start(): Promise<void> {
    await this.renew().catch((err) => this.logger.warn("budget lease: first renewal failed; retrying in the background", { error: String(err) }));
    this.timers.push(
      setInterval(() => void this.renew().catch((err) => this.logger.debug("budget lease renewal failed", { error: String(err) })), RENEW_MS),
      setInterval(() => void this.sweep().catch((err) => this.logger.debug("budget sweep failed", { error: String(err) })), SWEEP_MS),
    );
    for (const timer of this.timers) timer.unref?.();
  }

  async reserve(
    account: BudgetAccount,
    requestId: string,
    capNano: number,
    minNano: number,
    desiredNano: number,
    rateLimit?: FoldedRateLimit,
    journal?: JournaledCall,
  ): Promise<ReserveOutcome> {
    const item: ReserveItem = { account, request: requestId, cap: capNano, min: minNano, desired: desiredNano };
    if (journal) item.journal = journalColumns(journal);
    const limiter = this.rateLimiter;
    if (rateLimit) {
      if (!limiter) throw new Error("this ledger was built without a rate limiter to fold checks into");
      item.check = limiter.checkItem(rateLimit.rule, rateLimit.key);
    }
    let outcome: ReserveOutcome | Error;
    try {
      outcome = await this.reserves.call(item);
    } catch (err) {
      // The batch may have committed before its answer was lost (the database stopping
      // mid-commit, a dropped connection): the call is refused, so whatever it may hold goes
      // back with its journal entry (a settle without a row), retried until the database
      // takes it. Held unseen, it would count against the budget until this instance died,
      // and then be charged its reservation for a call that never went upstream.
      this.retrying.set(requestId, { actualNano: 0, row: null });
      this.scheduleRetry();
      throw err;
    }
    if (rateLimit && item.check && limiter) limiter.answered(rateLimit.rule, item.check);
    if (outcome instanceof Error) throw outcome;
    return outcome;
  }

  async settle(requestId: string, actualNano: number, row?: UsageRow): Promise<void> {
    try {
      await this.settleNow(requestId, actualNano, row ?? null);
      this.retrying.delete(requestId);
    } catch (err) {
      this.logger.warn("budget settle failed; will retry with its ledger row", { requestId, error: err instanceof Error ? err.message : String(err) });
      this.retrying.set(requestId, { actualNano, row: row ?? null });
      if (row?.generationId) this.identifyInJournal(requestId, row.generationId);
      this.scheduleRetry();
    }
  }

  async snapshot(account: BudgetAccount): Promise<BudgetSnapshot> {
    const [r] = await this.db.run((sql) => sql`SELECT spent_nano, reserved_nano FROM usage_totals WHERE account = ${account}`);
    return { spentNano: r ? num(r.spent_nano) : 0, reservedNano: r ? num(r.reserved_nano) : 0 };
  }

  /** A dead instance's reservations stay in the database; nothing to adopt. */
  async adopt(): Promise<void> {}

  /** budget_reclaim releases a dead instance's unjournaled reservations itself (migration 11). */
  async orphans(): Promise<string[]> {
    return [];
  }

  /** Settles (with rows) still waiting for the database to come back. */
  get pendingSettles(): number {
    return this.retrying.size;
  }

  /**
   * At a clean shutdown: retries pending settles until the deadline, stops the lease, and
   * leaves the registry (so the others do not wait a lease for nothing).
   */
  async close(deadlineMs = 5000): Promise<void> {
    for (const timer of this.timers.splice(0)) clearInterval(timer);
    const deadline = Date.now() + deadlineMs;
    while (this.retrying.size > 0 && Date.now() < deadline) {
      await this.retryAll();
      if (this.retrying.size > 0) await Bun.sleep(200);
    }
    if (this.retrying.size > 0)
      this.logger.error("budget settles not written at shutdown: the database refused until the deadline", { pending: this.retrying.size });
    await this.db.run((sql) => sql`DELETE FROM proxy_instances WHERE id = ${this.instanceId}`).catch(() => {});
  }

  /** Releases what dead instances hold; returns how many reservations. */
  async sweep(): Promise<number> {
    const [r] = await this.db.run((sql) => sql`SELECT budget_reclaim() AS released`);
    const released = num(r.released);
    if (released > 0) this.logger.warn("released the budget reservations a dead instance made for calls that never went upstream", { reservations: released });
    return released;
  }

  private async renew(): Promise<void> {
    try {
      await this.renewLease();
      this.leaseRenewed(true);
    } catch (err) {
      this.leaseRenewed(false);
      throw err;
    }
  }

  private async renewLease(): Promise<void> {
    await this.db.run(
      (sql) => sql`INSERT INTO proxy_instances (id, lease_until) VALUES (${this.instanceId}, clock_timestamp() + ${`${LEASE_MS} milliseconds`}::interval)
        ON CONFLICT (id) DO UPDATE SET lease_until = EXCLUDED.lease_until`,
    );
  }

  /**
   * A JSON call's journal entry has no generation id (its settle, with the row, was to end
   * it). Should this process stop before a retry lands, the reconciler could then only
   * charge the reservation, several times what the upstream billed; with the id it charges
   * the upstream's record. Best effort: a database that refused the settle may refuse this.
   */
  private identifyInJournal(requestId: string, generationId: string): void {
    this.journal
      .record({ open: [], identify: [{ requestId, generationId }] })
      .catch((err: unknown) => this.logger.debug("could not record a failed settle's generation id in the call journal", { requestId, error: String(err) }));
  }

  private settleNow(requestId: string, actualNano: number, row: UsageRow | null): Promise<void> {
    const record = row ? { ...ledgerRecord(row), frozen_cap_nano: row.frozenCapNano ?? null } : null;
    return this.settles.call({ request: requestId, actual: actualNano, row: record });
  }

  /**
   * One statement for the batch, checks and journal entries included; a request id already
   * reserved fails alone (an Error in its place).
   *
   * The journal entries are opened by the same statement, from what budget_reserve_limited_many
   * decided (the INSERT reads its rows, so it runs after it): a granted call is journaled with
   * what it was granted, a refused one is not, and the two commit together, as each did alone,
   * durably (budget_reserve_durable, migration 22: the call goes upstream only once a
   * PostgreSQL crash can no longer lose them). The entries are new rows on their own primary
   * key, locked by no reserve or settle before an account row, so this adds no deadlock.
   */
  private async reserveMany(items: ReserveItem[]): Promise<Array<ReserveOutcome | Error>> {
    const json = JSON.stringify(items);
    const journaling = items.some((i) => i.journal !== undefined);
    const rows = await this.db.run((sql) =>
      journaling
        ? sql`WITH input AS (SELECT ${json}::text::jsonb AS items, ${this.instanceId}::text AS instance),
          decided AS (SELECT d.* FROM input, budget_reserve_durable(input.items, input.instance) AS d),
          opened AS (
            -- Granted items with a journal entry: the row as call_journal_open would write it,
            -- with what was granted. Refused ones leave none.
            INSERT INTO call_journal
            SELECT r.* FROM input, decided AS d,
              LATERAL jsonb_populate_record(NULL::call_journal, (input.items -> d.item -> 'journal') || jsonb_build_object(
                'request_id', input.items -> d.item -> 'request', 'owner', input.instance, 'account', input.items -> d.item -> 'account',
                'reserved_nano', d.a, 'cap_nano', input.items -> d.item -> 'cap')) AS r
            WHERE d.status = 1 AND input.items -> d.item ? 'journal'
            ON CONFLICT (request_id) DO NOTHING)
          SELECT item, status, a, b, allowed, remaining, reset_ms FROM decided`
        : sql`SELECT item, status, a, b, allowed, remaining, reset_ms FROM budget_reserve_durable(${json}::text::jsonb, ${this.instanceId})`,
    );
    if (rows.length !== items.length) throw new Error(`budget_reserve_durable answered ${rows.length} of ${items.length} reserves`);
    const outcomes = new Array<ReserveOutcome | Error>(items.length);
    for (const r of rows) {
      const at = num(r.item);
      const status = num(r.status);
      const check = items[at]!.check;
      const rateLimit = check && { allowed: r.allowed === true, limit: check.limit, remaining: num(r.remaining), resetMs: num(r.reset_ms) };
      if (status === 1) outcomes[at] = { ok: true, grantedNano: num(r.a), rateLimit };
      else if (status === 3) outcomes[at] = { ok: false, spentNano: 0, reservedNano: 0, rateLimit };
      else if (status === 2) outcomes[at] = { ok: false, spentNano: num(r.a), reservedNano: num(r.b), frozen: true, rateLimit };
      else if (status === 0) outcomes[at] = { ok: false, spentNano: num(r.a), reservedNano: num(r.b), rateLimit };
      else outcomes[at] = new Error(`request ${items[at]!.request} already holds a reservation`);
    }
    return outcomes;
  }

  /** One durable transaction for the batch. */
  private async settleMany(items: SettleItem[]): Promise<void[]> {
    await this.db.run((sql) => sql`SELECT budget_settle_many(${JSON.stringify(items)}::text::jsonb)`);
    return new Array<void>(items.length).fill(undefined);
  }

  /** Every pending settle, batched; those whose batch fails stay for the next round. */
  private async retryAll(): Promise<void> {
    await Promise.allSettled(
      [...this.retrying].map(async ([requestId, { actualNano, row }]) => {
        await this.settleNow(requestId, actualNano, row);
        this.retrying.delete(requestId);
      }),
    );
  }

  private scheduleRetry(): void {
    if (this.retryTimer) return;
    this.retryTimer = setTimeout(async () => {
      this.retryTimer = null;
      await this.retryAll();
      if (this.retrying.size > 0) this.scheduleRetry();
    }, 1000);
    this.retryTimer.unref?.();
  }
}
