import type { BudgetAccount } from "./accounts";

/** What the live counters say about one account, in nano-dollars. */
export interface BudgetSnapshot {
  spentNano: number;
  reservedNano: number;
}

export type ReserveOutcome =
  | { ok: true; grantedNano: number }
  | { ok: false; spentNano: number; reservedNano: number };

/**
 * Live budget counters (DESIGN.md §3 "The hard cap"). Implementations must make
 * `reserve` atomic with respect to every other reserve and settle on the same account,
 * across every process that shares them.
 */
export interface BudgetLedger {
  /**
   * Reserves between `minNano` and `desiredNano` against `capNano`: the most that fits,
   * `min(desired, cap - spent - reserved)`, or nothing when even `minNano` does not fit.
   * Granting a range in one atomic step lets the caller size `max_tokens` to what it got
   * without a read-then-write race.
   */
  reserve(account: BudgetAccount, requestId: string, capNano: number, minNano: number, desiredNano: number): Promise<ReserveOutcome>;
  /**
   * Replaces the reservation with the actual cost. Idempotent: settling an unknown or
   * already settled request id changes nothing. Called on the same ledger (process) that
   * reserved, which is where the request ran.
   */
  settle(requestId: string, actualNano: number): Promise<void>;
  snapshot(account: BudgetAccount): Promise<BudgetSnapshot>;
  /** At a clean shutdown, after every settle and the usage writer's last flush. */
  close?(): Promise<void>;
}

/**
 * The embedded ledger: counters in this process, loaded per account from the durable
 * totals on first use (which is the "rebuild from the store at start"). JavaScript runs
 * one handler at a time, so each method body is atomic without locks.
 */
export class InMemoryBudgetLedger implements BudgetLedger {
  private readonly accounts = new Map<BudgetAccount, BudgetSnapshot>();
  private readonly reservations = new Map<string, { account: BudgetAccount; amountNano: number }>();

  constructor(private readonly loadSpentNano: (account: BudgetAccount) => number) {}

  async reserve(account: BudgetAccount, requestId: string, capNano: number, minNano: number, desiredNano: number): Promise<ReserveOutcome> {
    const counters = this.counters(account);
    if (this.reservations.has(requestId)) throw new Error(`request ${requestId} already holds a reservation`);
    const available = capNano - counters.spentNano - counters.reservedNano;
    if (available < minNano) return { ok: false, ...counters };
    const grantedNano = Math.min(desiredNano, available);
    counters.reservedNano += grantedNano;
    this.reservations.set(requestId, { account, amountNano: grantedNano });
    return { ok: true, grantedNano };
  }

  async settle(requestId: string, actualNano: number): Promise<void> {
    const reservation = this.reservations.get(requestId);
    if (!reservation) return;
    this.reservations.delete(requestId);
    const counters = this.counters(reservation.account);
    counters.reservedNano -= reservation.amountNano;
    counters.spentNano += actualNano;
  }

  async snapshot(account: BudgetAccount): Promise<BudgetSnapshot> {
    return { ...this.counters(account) };
  }

  private counters(account: BudgetAccount): BudgetSnapshot {
    let counters = this.accounts.get(account);
    if (!counters) {
      counters = { spentNano: this.loadSpentNano(account), reservedNano: 0 };
      this.accounts.set(account, counters);
    }
    return counters;
  }
}
