import type { Clock } from "../clock";
import type { Logger } from "../logger";
import { PeriodicTask } from "../periodic-task";
import type { CallJournalRepository, ClaimedEntry } from "../store/call-journal";
import type { UpstreamClient } from "../upstream/client";
import type { BudgetLedger } from "../budget/ledger";
import type { Meter } from "./meter";
import type { Charge } from "../pricing/reservation";
import { dayAccountOf, meteredCallOf } from "./journaled-call";
import { chargeOfClaimed, INSTANCE_DIED, type OpenUserKey, type RecordLookup } from "./reconciled-charge";
import { ReconcileSlots } from "./reconcile-slots";

export interface ReconcilerOptions {
  /** How often the journal is looked at for calls to settle. */
  pollMs: number;
  /** How long the upstream's record is waited for, from the call's hand-over; then the reservation is charged. */
  giveUpMs: number;
  /** Most calls being reconciled (looked up, then settled) at once in this process. */
  concurrency: number;
  /** A lookup's deadline: the upstream client's own on a GET (UPSTREAM_TIMEOUT_MS). */
  lookupTimeoutMs: number;
}

export { INSTANCE_DIED };
/** Room for opening the payer's key and settling after the lookup's deadline, before the claim lapses. */
const CLAIM_MARGIN_MS = 30_000;

export interface ReconcilerStats {
  /** Calls settled from the upstream's record. */
  fromRecords: number;
  /** Calls charged their whole reservation (no generation id, or no record in time). */
  atReservation: number;
  /** Holds of dead processes released because their calls never went upstream. */
  released: number;
  /** What reconciled calls cost in all, and what was held for them (the difference went back to the budgets). */
  chargedNano: number;
  heldNano: number;
}

/**
 * Settles every call whose usage was not seen (ARCHITECTURE.md §3 "The hard cap"): the
 * client left and the upstream never finished, a timeout, a cut stream, or a process that
 * died with calls open. Each is in the call journal (src/store/call-journal.ts) with its
 * reservation still held, so nothing more is admitted against it meanwhile. A call with a
 * generation id is settled at the upstream's record of it (looked up with backoff, since the
 * record can take a while to appear); one without, or whose record has not come
 * RECONCILE_GIVE_UP_SECONDS after its hand-over (./lookup-schedule.ts), at its whole
 * reservation. Every instance runs one; a claim gives each entry to one of them at a time,
 * and an entry ends with its row, so each call is settled once.
 *
 * Calls are reconciled side by side, at most `concurrency` at once (./reconcile-slots.ts),
 * and no round waits for them: a lookup that hangs holds its own slot until the upstream
 * client's deadline, nothing else.
 */
export class Reconciler {
  readonly stats: ReconcilerStats = { fromRecords: 0, atReservation: 0, released: 0, chargedNano: 0, heldNano: 0 };
  private readonly rounds = new PeriodicTask(() => this.round());
  private readonly slots: ReconcileSlots;
  private readonly lookup: RecordLookup;
  /** The writes under way (a row and its holds, or the next lookup's time): what stop() waits for. */
  private readonly finishing = new Set<Promise<void>>();
  private stopped = false;

  constructor(
    private readonly journal: CallJournalRepository,
    private readonly budget: BudgetLedger,
    private readonly meter: Meter,
    upstream: UpstreamClient,
    clock: Clock,
    private readonly logger: Logger,
    /** This process's instance id. */
    private readonly owner: string,
    private readonly options: ReconcilerOptions,
    openUserKey: OpenUserKey,
    /** The cost a call's ledger row charged, null without a row: what an ended call's leftover hold settles at. */
    private readonly rowCost: (requestId: string) => Promise<number | null> = async () => null,
    /** Whether other owners' lapsed leases mean they died (src/metering/lease-continuity.ts); else only this owner's entries are taken. */
    mayTakeOrphans: () => boolean = () => true,
  ) {
    // A claimed call is looked up at once (it never waits for a slot): its claim outlives a lookup.
    const claimMs = options.lookupTimeoutMs + CLAIM_MARGIN_MS;
    const claim = (room: number) => journal.claimDue(owner, clock.now(), room, claimMs, INSTANCE_DIED, mayTakeOrphans());
    this.slots = new ReconcileSlots(options.concurrency, claim, (entry) => this.reconcile(entry), logger);
    this.lookup = { upstream, openUserKey, clock, logger, giveUpMs: options.giveUpMs };
  }

  /**
   * Before serving, on a store this process owns alone (the embedded lock): holds again, in
   * a ledger whose holds die with its process, what the previous process left in the
   * journal, so nothing is admitted against it before it is settled. Those owners are dead
   * for sure, so their leases are dropped and their entries taken at once. Shared stores
   * keep a dead instance's holds where they are and wait for its lease to lapse instead.
   */
  async adoptLeftovers(dropLease: (owner: string) => Promise<void>): Promise<number> {
    const left = await this.journal.notOwnedBy(this.owner);
    await this.budget.adopt(
      left.flatMap((e) => [
        { requestId: e.requestId, account: e.account, amountNano: e.reservedNano, capNano: e.capNano },
        ...(e.ceilingReservationId
          ? [
              {
                requestId: e.ceilingReservationId,
                account: dayAccountOf(e),
                amountNano: e.ceilingReservedNano ?? e.reservedNano,
                capNano: e.ceilingCapNano ?? e.capNano,
              },
            ]
          : []),
      ]),
    );
    for (const owner of new Set(left.map((e) => e.owner))) await dropLease(owner);
    if (left.length > 0) this.logger.warn("calls left open by an earlier process are held until reconciled", { calls: left.length });
    return left.length;
  }

  start(): void {
    this.stopped = false;
    this.slots.start();
    this.rounds.start(this.options.pollMs);
  }

  /** A round now, then waits until no call is being reconciled (tests; the poll does not wait for lookups). */
  async runRound(): Promise<void> {
    await this.rounds.run();
    await this.slots.idle();
  }

  /**
   * Stops claiming and waits for the writes under way, not for lookups still out (each
   * bounded by the upstream client's deadline): one that answers after this writes nothing
   * and leaves its entry claimed, for the next owner once this process's lease is dropped.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    // The slots first: a call finishing meanwhile claims no other.
    const claims = this.slots.stop();
    await this.rounds.stop();
    await claims;
    await Promise.allSettled(this.finishing);
  }

  /** The poll: holds left by dead processes, then the free slots filled. */
  private async round(): Promise<void> {
    await this.releaseUnjournaledOrphans().catch((err) =>
      this.logger.warn("releasing the holds of dead processes failed; retrying at the next poll", { error: String(err) }),
    );
    await this.slots.fill();
  }

  private async reconcile(entry: ClaimedEntry): Promise<void> {
    const charge = await chargeOfClaimed(entry, this.lookup);
    // Stopping: nothing written, the entry left claimed for the next owner.
    if (this.stopped) return;
    const write = "retryAt" in charge ? this.journal.retryLater(entry.requestId, this.owner, entry.attempts + 1, charge.retryAt) : this.settle(entry, charge);
    this.finishing.add(write);
    try {
      await write;
    } finally {
      this.finishing.delete(write);
    }
  }

  /** The row first, then the holds (Meter.finishReconciled). */
  private async settle(entry: ClaimedEntry, charge: Charge): Promise<void> {
    const reason = entry.reconcileReason ?? INSTANCE_DIED;
    // A record whose numbers cannot be true is charged the reservation instead (the meter's check).
    const settled = await this.meter.finishReconciled(meteredCallOf(entry), charge, reason, entry.generationId);
    if (settled.source === "generation") this.stats.fromRecords++;
    else this.stats.atReservation++;
    this.stats.chargedNano += settled.costNano;
    this.stats.heldNano += entry.reservedNano;
    this.logger.info("reconciled a call whose usage was not seen", {
      requestId: entry.requestId,
      reason,
      source: settled.source,
      costNano: settled.costNano,
      reservedNano: entry.reservedNano,
    });
  }

  /**
   * Holds nobody else will settle (Redis: a dead process's, or one a rebuild made again from
   * the journal) whose calls are no longer in the journal: a call that never went upstream,
   * settled at nothing, or one whose row is written (its process died, or Redis lost the
   * settle, before the hold was settled), settled at its row's cost. The row and the end of
   * the journal entry are one transaction, so an entry gone means its row is there, if any.
   */
  private async releaseUnjournaledOrphans(): Promise<void> {
    const orphans = await this.budget.orphans();
    if (orphans.length === 0) return;
    const journaled = await this.journal.journaled(orphans);
    for (const id of orphans) {
      if (journaled.has(id)) continue;
      // A grant call's hold on its day settles at its call's cost (src/services/chat-reservation.ts).
      const cost = await this.rowCost(id.endsWith(GRANT_DAY_SUFFIX) ? id.slice(0, -GRANT_DAY_SUFFIX.length) : id);
      await this.budget.settle(id, cost ?? 0);
      if (cost === null) this.stats.released++;
    }
  }
}

/** How a grant call's reservation on its app's day is named after the call's (src/services/chat-reservation.ts). */
const GRANT_DAY_SUFFIX = "/grant-day";
