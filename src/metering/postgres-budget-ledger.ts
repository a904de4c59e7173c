import { num, type PostgresDatabase } from "../store/postgres/database";
import { ledgerRecord } from "../store/postgres/usage-ledger";
import type { UsageRow } from "../store/usage-ledger";
import type { Logger } from "../logger";
import type { BudgetAccount } from "./accounts";
import type { BudgetLedger, BudgetSnapshot, ReserveOutcome } from "./budget-ledger";

/** How long an instance's reservations survive it without a renewal (Redis uses the same bound). */
const LEASE_MS = 5000;
const RENEW_MS = 1000;
const SWEEP_MS = 2500;

/**
 * Budgets kept in PostgreSQL itself, for instances that share only the database (no Redis).
 * Reserve and settle are one function call each (../store/postgres/budgets-sql.ts):
 * the account's usage_totals row is locked for the call, so reserves from every instance
 * on one account queue there and the cap holds exactly. Settling writes the ledger row in
 * the same transaction, so the durable totals and the live counters are one and the same:
 * nothing to rebuild, nothing counted twice, no row waiting in a queue to be lost.
 *
 * Each instance renews a lease; every instance sweeps now and then and releases the
 * reservations of instances whose lease ran out (died without settling). A settle that
 * fails (the database is away) is retried in the background with its row.
 */
export class PostgresBudgetLedger implements BudgetLedger {
  readonly kind = "postgres";
  readonly recordsRows = true;
  readonly instanceId = crypto.randomUUID();
  private readonly retrying = new Map<string, { actualNano: number; row: UsageRow | null }>();
  private readonly timers: Array<ReturnType<typeof setInterval>> = [];
  private retryTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    private readonly db: PostgresDatabase,
    private readonly logger: Logger,
  ) {}

  /** Registers the lease before the first reservation, then renews and sweeps in the background. */
  async start(): Promise<void> {
    await this.renew().catch((err) => this.logger.warn("budget lease: first renewal failed; retrying in the background", { error: String(err) }));
    this.timers.push(
      setInterval(() => void this.renew().catch((err) => this.logger.debug("budget lease renewal failed", { error: String(err) })), RENEW_MS),
      setInterval(() => void this.sweep().catch((err) => this.logger.debug("budget sweep failed", { error: String(err) })), SWEEP_MS),
    );
    for (const timer of this.timers) timer.unref?.();
  }

  async reserve(account: BudgetAccount, requestId: string, capNano: number, minNano: number, desiredNano: number): Promise<ReserveOutcome> {
    const [r] = await this.db.run(
      (sql) => sql`SELECT * FROM budget_reserve(${account}, ${requestId}, ${capNano}, ${minNano}, ${desiredNano}, ${this.instanceId})`,
    );
    const status = num(r.status);
    if (status === 1) return { ok: true, grantedNano: num(r.a) };
    if (status === 2) return { ok: false, spentNano: num(r.a), reservedNano: num(r.b), frozen: true };
    return { ok: false, spentNano: num(r.a), reservedNano: num(r.b) };
  }

  async settle(requestId: string, actualNano: number, row?: UsageRow): Promise<void> {
    try {
      await this.settleNow(requestId, actualNano, row ?? null);
      this.retrying.delete(requestId);
    } catch (err) {
      this.logger.warn("budget settle failed; will retry with its ledger row", { requestId, error: err instanceof Error ? err.message : String(err) });
      this.retrying.set(requestId, { actualNano, row: row ?? null });
      this.scheduleRetry();
    }
  }

  async snapshot(account: BudgetAccount): Promise<BudgetSnapshot> {
    const [r] = await this.db.run((sql) => sql`SELECT spent_nano, reserved_nano FROM usage_totals WHERE account = ${account}`);
    return { spentNano: r ? num(r.spent_nano) : 0, reservedNano: r ? num(r.reserved_nano) : 0 };
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
    if (released > 0) this.logger.warn("released the budget reservations of an instance that died without settling", { reservations: released });
    return released;
  }

  private async renew(): Promise<void> {
    await this.db.run(
      (sql) => sql`INSERT INTO proxy_instances (id, lease_until) VALUES (${this.instanceId}, clock_timestamp() + ${`${LEASE_MS} milliseconds`}::interval)
        ON CONFLICT (id) DO UPDATE SET lease_until = EXCLUDED.lease_until`,
    );
  }

  private async settleNow(requestId: string, actualNano: number, row: UsageRow | null): Promise<void> {
    const record = row ? { ...ledgerRecord(row), frozen_cap_nano: row.frozenCapNano ?? null } : null;
    await this.db.run((sql) => sql`SELECT budget_settle(${requestId}, ${actualNano}, ${record}::jsonb)`);
  }

  private async retryAll(): Promise<void> {
    for (const [requestId, { actualNano, row }] of [...this.retrying]) {
      try {
        await this.settleNow(requestId, actualNano, row);
        this.retrying.delete(requestId);
      } catch {
        return; // still down: the next round tries again
      }
    }
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
