import type { BudgetAccount } from "./accounts";
import type { UsageRow } from "./usage-row";
import type { RateLimitDecision, RateLimitRule } from "../ratelimit/rate-limiter";
import type { UpstreamPayer } from "./target";

/** What the live counters say about one account, in nano-dollars. */
export interface BudgetSnapshot {
  spentNano: number;
  reservedNano: number;
}

/**
 * `rateLimit`: the decision of a rate limit checked in the same atomic step (a ledger whose
 * engine folds its limiter's checks, src/store/engine.ts, when asked to). When it refused,
 * nothing was reserved.
 */
export type ReserveOutcome = (
  | { ok: true; grantedNano: number }
  /** `frozen`: an earlier call cost more than its reservation under this cap (see settle). */
  | { ok: false; spentNano: number; reservedNano: number; frozen?: true }
) & { rateLimit?: RateLimitDecision };

/** A rate-limit check to run inside the reservation (one rule, one caller). */
export interface FoldedRateLimit {
  rule: RateLimitRule;
  key: string;
}

/**
 * The call a reservation is for, as the call journal records it (src/store/call-journal.ts),
 * less what the reservation itself knows (request id, account, cap, what was granted, and
 * this process as the owner): for a ledger that journals the call in the reservation's own
 * step (`journalsCalls`).
 */
export interface JournaledCall {
  /** A grant call's reservation on its app's day, made before its grant's (src/services/chat-reservation.ts); null otherwise. */
  ceilingReservationId: string | null;
  appId: string;
  appUserId: string | null;
  grantId: string | null;
  /**
   * Whose upstream key paid the call: the reconciler looks its generation up with that key
   * (a user's own, reopened from the connection by `appId` and `appUserId`), since the
   * upstream shows a generation's record to the account that paid it.
   */
  payer: UpstreamPayer;
  period: string;
  model: string;
  streamed: boolean;
  startedAt: number;
}

/** The settled spend of an account, from the durable store. */
export type SpentLoader = (account: BudgetAccount) => Promise<number>;
/** The cap an account was frozen at by an overrun, from the durable store; null when it never was. */
export type FrozenCapLoader = (account: BudgetAccount) => Promise<number | null>;

/**
 * Live budget counters (ARCHITECTURE.md §3 "The hard cap"). Implementations must make
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
  reserve(
    account: BudgetAccount,
    requestId: string,
    capNano: number,
    minNano: number,
    desiredNano: number,
    rateLimit?: FoldedRateLimit,
    journal?: JournaledCall,
  ): Promise<ReserveOutcome>;
  /**
   * True when `reserve` records the call in the call journal in the same atomic step, given
   * `journal` (the PostgreSQL ledger, whose counters sit in the journal's database): a
   * granted reservation is then journaled, a refused one is not, and the call needs no
   * journal entry of its own. Settling the reservation ends the entry too.
   */
  readonly journalsCalls?: boolean;
  /**
   * Replaces the reservation with the actual cost. Idempotent: settling an unknown or
   * already settled request id changes nothing. Called on the same ledger (process) that
   * reserved, which is where the request ran.
   *
   * An actual cost above the reservation (a price changed under us) freezes the account at
   * the cap it was reserved under: every later reserve against a cap that is not higher is
   * refused, so an overrun can never compound. A new period is a new account; raising the
   * cap lifts the freeze.
   */
  settle(requestId: string, actualNano: number, row?: UsageRow): Promise<void>;
  /**
   * True when `settle` also writes the ledger row it is given, in the same transaction
   * (the PostgreSQL ledger); otherwise the caller queues the row in the usage writer.
   */
  readonly recordsRows: boolean;
  snapshot(account: BudgetAccount): Promise<BudgetSnapshot>;
  /**
   * Holds again what a previous process on this store held when it stopped: its journaled
   * calls (src/store/call-journal.ts), not settled yet, so that nothing is admitted against
   * them until the reconciler settles each. Without a cap check: they are spend in flight.
   * Only a ledger whose holds die with its process does anything here; the shared ones
   * (Redis, PostgreSQL) keep a dead process's holds themselves.
   */
  adopt(holds: AdoptedHold[]): Promise<void>;
  /**
   * Reservation ids held for processes that died, which nobody will settle by itself: the
   * reconciler settles the journaled ones and releases the others (their calls never went
   * upstream). Empty for ledgers that sort this out themselves.
   */
  orphans(): Promise<string[]>;
  /** At a clean shutdown, after every settle and the usage writer's last flush. */
  close?(): Promise<void>;
}

/** A reservation to hold again (BudgetLedger.adopt). */
export interface AdoptedHold {
  requestId: string;
  account: BudgetAccount;
  amountNano: number;
  capNano: number;
}

/**
 * The embedded ledger: counters in this process, loaded per account from the durable
 * totals on first use (which is the "rebuild from the store at start"). JavaScript runs
 * one handler at a time, so each method body is atomic without locks once the account is
 * loaded: the only await comes before any counter is read.
 */
export class InMemoryBudgetLedger implements BudgetLedger {
  readonly recordsRows = false;
  private readonly accounts = new Map<BudgetAccount, BudgetSnapshot & { frozenCapNano: number | null }>();
  private readonly loading = new Map<BudgetAccount, Promise<void>>();
  private readonly reservations = new Map<string, { account: BudgetAccount; amountNano: number; capNano: number }>();

  constructor(
    private readonly loadSpentNano: SpentLoader,
    private readonly loadFrozenCapNano: FrozenCapLoader = async () => null,
  ) {}

  async reserve(account: BudgetAccount, requestId: string, capNano: number, minNano: number, desiredNano: number): Promise<ReserveOutcome> {
    const counters = await this.counters(account);
    if (this.reservations.has(requestId)) throw new Error(`request ${requestId} already holds a reservation`);
    const { spentNano, reservedNano } = counters;
    if (counters.frozenCapNano !== null && capNano <= counters.frozenCapNano) return { ok: false, spentNano, reservedNano, frozen: true };
    const available = capNano - spentNano - reservedNano;
    if (available < minNano) return { ok: false, spentNano, reservedNano };
    const grantedNano = Math.min(desiredNano, available);
    counters.reservedNano += grantedNano;
    this.reservations.set(requestId, { account, amountNano: grantedNano, capNano });
    return { ok: true, grantedNano };
  }

  async settle(requestId: string, actualNano: number): Promise<void> {
    const reservation = this.reservations.get(requestId);
    if (!reservation) return;
    this.reservations.delete(requestId);
    // Loaded: the reservation was made against it, and accounts are never evicted.
    const counters = this.accounts.get(reservation.account)!;
    counters.reservedNano -= reservation.amountNano;
    counters.spentNano += actualNano;
    if (actualNano > reservation.amountNano) counters.frozenCapNano = Math.max(counters.frozenCapNano ?? 0, reservation.capNano);
  }

  async snapshot(account: BudgetAccount): Promise<BudgetSnapshot> {
    const { spentNano, reservedNano } = await this.counters(account);
    return { spentNano, reservedNano };
  }

  async adopt(holds: AdoptedHold[]): Promise<void> {
    for (const hold of holds) {
      const counters = await this.counters(hold.account);
      if (this.reservations.has(hold.requestId)) continue;
      counters.reservedNano += hold.amountNano;
      this.reservations.set(hold.requestId, { account: hold.account, amountNano: hold.amountNano, capNano: hold.capNano });
    }
  }

  async orphans(): Promise<string[]> {
    return [];
  }

  /** The account's counters, loaded once: concurrent first uses share one load. */
  private async counters(account: BudgetAccount) {
    const loaded = this.accounts.get(account);
    if (loaded) return loaded;
    let loading = this.loading.get(account);
    if (!loading) {
      loading = (async () => {
        const [spentNano, frozenCapNano] = await Promise.all([this.loadSpentNano(account), this.loadFrozenCapNano(account)]);
        this.accounts.set(account, { spentNano, reservedNano: 0, frozenCapNano });
      })().finally(() => this.loading.delete(account));
      this.loading.set(account, loading);
    }
    await loading;
    return this.accounts.get(account)!;
  }
}
