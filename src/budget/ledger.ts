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
  /**
   * What that reservation holds and the daily ceiling it was made under (null otherwise, and
   * on entries from before they were journaled): a call settled from the journal freezes its
   * day by them as this process's own calls do, and a restart holds the day's share again.
   */
  ceilingReservedNano: number | null;
  ceilingCapNano: number | null;
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
  /**
   * True when a hold may be settled only once its call's ledger row is in the store (the
   * Redis ledger, whose counters can outlive this process, and be rebuilt from the store:
   * what the store counts and what the counters settled must never differ for a call, so no
   * process may die between the two with the counters ahead of the store).
   */
  readonly settlesAfterRow?: boolean;
  /**
   * Whether a reserved call may go upstream now that it is journaled, for a ledger whose
   * counters can lose data while a call is between the two (src/store/redis/budget-scripts.ts):
   * false when its hold is gone; the caller then releases the call unsent. Absent: always.
   */
  confirmHeld?(requestId: string): Promise<boolean>;
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
  /** Accounts whose counters this process holds in memory (the embedded ledger; /metrics shows it). */
  readonly accountsInMemory?: number;
}

/** A reservation to hold again (BudgetLedger.adopt). */
export interface AdoptedHold {
  requestId: string;
  account: BudgetAccount;
  amountNano: number;
  capNano: number;
}

/** One account's counters in the embedded ledger. */
interface LoadedAccount extends BudgetSnapshot {
  frozenCapNano: number | null;
  /** Reservations held on it now: an account with any is never forgotten. */
  holds: number;
  /** The ledger's sweep round in which it was last used (InMemoryBudgetLedger.forgetIdle). */
  usedInRound: number;
}

/** How long the sweep holds the event loop before it lets other work run (each idle account costs two reads of the totals). */
const SWEEP_TURN_MS = 2;
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * The embedded ledger: counters in this process, loaded per account from the durable
 * totals on first use (which is the "rebuild from the store at start"). JavaScript runs
 * one handler at a time, so each method body is atomic without locks once the account is
 * loaded: the only await comes before any counter is read.
 *
 * Accounts not used for a while are forgotten (`forgetIdle`), so memory follows the
 * accounts in use rather than every account since start: a month's users, each grant and
 * each day of an app's grants is an account of its own, about 200 bytes each. One is
 * forgotten only when loading it again would give the same counters.
 */
export class InMemoryBudgetLedger implements BudgetLedger {
  readonly recordsRows = false;
  private readonly accounts = new Map<BudgetAccount, LoadedAccount>();
  private readonly loading = new Map<BudgetAccount, Promise<void>>();
  private readonly reservations = new Map<string, { account: BudgetAccount; amountNano: number; capNano: number }>();
  /** Sweeps begun (forgetIdle): an account used since the one before the last is not idle. */
  private round = 0;

  constructor(
    private readonly loadSpentNano: SpentLoader,
    private readonly loadFrozenCapNano: FrozenCapLoader = async () => null,
  ) {}

  get accountsInMemory(): number {
    return this.accounts.size;
  }

  async reserve(account: BudgetAccount, requestId: string, capNano: number, minNano: number, desiredNano: number): Promise<ReserveOutcome> {
    const counters = await this.counters(account);
    if (this.reservations.has(requestId)) throw new Error(`request ${requestId} already holds a reservation`);
    const { spentNano, reservedNano } = counters;
    if (counters.frozenCapNano !== null && capNano <= counters.frozenCapNano) return { ok: false, spentNano, reservedNano, frozen: true };
    const available = capNano - spentNano - reservedNano;
    if (available < minNano) return { ok: false, spentNano, reservedNano };
    const grantedNano = Math.min(desiredNano, available);
    counters.reservedNano += grantedNano;
    counters.holds++;
    this.reservations.set(requestId, { account, amountNano: grantedNano, capNano });
    return { ok: true, grantedNano };
  }

  async settle(requestId: string, actualNano: number): Promise<void> {
    const reservation = this.reservations.get(requestId);
    if (!reservation) return;
    this.reservations.delete(requestId);
    // Loaded: the reservation was made against it, and an account holding one is never forgotten.
    const counters = this.accounts.get(reservation.account)!;
    counters.usedInRound = this.round;
    counters.holds--;
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
      counters.holds++;
      this.reservations.set(hold.requestId, { account: hold.account, amountNano: hold.amountNano, capNano: hold.capNano });
    }
  }

  async orphans(): Promise<string[]> {
    return [];
  }

  /**
   * Begins a sweep round and forgets the accounts idle since the round before it began
   * (called once an interval: an account is forgotten after one to two intervals unused)
   * whose counters a load would give back as they are: nothing reserved, and the durable
   * totals' spend and freeze equal to these. A settle's ledger row is written after it (the
   * usage writer's next batch); until it is, the totals are behind and the account stays.
   * The same goes for an overrun's freeze that no row carries (a grant day's, for a call
   * journaled before the journal kept the day's hold). An account
   * used while its totals were being read stays too. Returns how many were forgotten.
   */
  async forgetIdle(): Promise<number> {
    const round = ++this.round;
    const idle = (counters: LoadedAccount) => counters.usedInRound < round - 1 && counters.holds === 0;
    let forgotten = 0;
    let turnStarted = performance.now();
    // The map's own iterator: it goes on past deletions and awaits, and accounts added
    // meanwhile are in use, so they are passed over.
    for (const [account, counters] of this.accounts) {
      if (performance.now() - turnStarted > SWEEP_TURN_MS) {
        await nextTurn();
        turnStarted = performance.now();
      }
      if (!idle(counters)) continue;
      const [spentNano, frozenCapNano] = await Promise.all([this.loadSpentNano(account), this.loadFrozenCapNano(account)]);
      const same = counters.spentNano === spentNano && counters.frozenCapNano === frozenCapNano && counters.reservedNano === 0;
      if (same && idle(counters) && this.accounts.get(account) === counters) {
        this.accounts.delete(account);
        forgotten++;
      }
    }
    return forgotten;
  }

  /** The account's counters, loaded once: concurrent first uses share one load. Marks it used. */
  private async counters(account: BudgetAccount): Promise<LoadedAccount> {
    const loaded = this.accounts.get(account);
    if (loaded) {
      loaded.usedInRound = this.round;
      return loaded;
    }
    let loading = this.loading.get(account);
    if (!loading) {
      loading = (async () => {
        const [spentNano, frozenCapNano] = await Promise.all([this.loadSpentNano(account), this.loadFrozenCapNano(account)]);
        this.accounts.set(account, { spentNano, reservedNano: 0, frozenCapNano, holds: 0, usedInRound: this.round });
      })().finally(() => this.loading.delete(account));
      this.loading.set(account, loading);
    }
    await loading;
    const counters = this.accounts.get(account)!;
    counters.usedInRound = this.round;
    return counters;
  }
}
