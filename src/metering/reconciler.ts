import type { Clock } from "../clock";
import type { Logger } from "../logger";
import { periodAt, usdToNanoCeil } from "../money";
import { PeriodicTask } from "../periodic-task";
import type { BudgetTarget } from "../budget/target";
import type { CallJournalRepository, JournalEntry } from "../store/call-journal";
import type { UpstreamClient } from "../upstream/client";
import { lookUpGeneration } from "../upstream/generation-record";
import type { BudgetLedger } from "../budget/ledger";
import { grantDayAccount } from "../budget/accounts";
import type { Meter, MeteredCall } from "./meter";
import { reservationCharge, type Charge } from "../pricing/reservation";
import { SealedSecretError } from "../secrets/secret-box";

export interface ReconcilerOptions {
  /** How often the journal is looked at for calls to settle. */
  pollMs: number;
  /** How long the upstream's record is waited for; then the reservation is charged. */
  giveUpMs: number;
}

/**
 * Opens a user's own upstream key (the store's `userUpstreamKey`) for looking up a call it
 * paid; null when the connection has no key any more (revoked, or relinked to the operator).
 */
export type OpenUserKey = (appId: string, appUserId: string) => Promise<string | null>;

/** The row's status of a call whose process died before it was settled. */
export const INSTANCE_DIED = "instance_died";
/** Entries taken per round; a claim is this process's for CLAIM_MS (longer than a round takes). */
const BATCH = 64;
const CLAIM_MS = 60_000;
/** Waits between lookups of a record not there yet: 1 s, doubling, at most a minute. */
const retryDelayMs = (attempts: number) => Math.min(60_000, 1000 * 2 ** Math.min(attempts, 6));

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
 * record can take a while to appear); one without, or whose record never comes, at its whole
 * reservation. Every instance runs one; a claim gives each entry to one of them at a time,
 * and an entry ends with its row, so each call is settled once.
 */
export class Reconciler {
  readonly stats: ReconcilerStats = { fromRecords: 0, atReservation: 0, released: 0, chargedNano: 0, heldNano: 0 };
  private readonly rounds = new PeriodicTask(() =>
    this.round().catch((err) => this.logger.warn("reconciling calls failed; retrying at the next poll", { error: String(err) })),
  );

  constructor(
    private readonly journal: CallJournalRepository,
    private readonly budget: BudgetLedger,
    private readonly meter: Meter,
    private readonly upstream: UpstreamClient,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** This process's instance id. */
    private readonly owner: string,
    private readonly options: ReconcilerOptions,
    private readonly openUserKey: OpenUserKey,
  ) {}

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
    this.rounds.start(this.options.pollMs);
  }

  /** One round now (tests, and the timer); a round already running is joined. */
  runRound(): Promise<void> {
    return this.rounds.run();
  }

  stop(): Promise<void> {
    return this.rounds.stop();
  }

  private async round(): Promise<void> {
    await this.releaseUnjournaledOrphans();
    for (;;) {
      const due = await this.journal.claimDue(this.owner, this.clock.now(), BATCH, CLAIM_MS, INSTANCE_DIED);
      for (const entry of due) await this.reconcile(entry);
      if (due.length < BATCH) break;
    }
  }

  private async reconcile(entry: JournalEntry): Promise<void> {
    const charge = await this.chargeOf(entry);
    if (charge === "later") return;
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

  /** The upstream's record's cost, or the reservation; "later" when the record may still come. */
  private async chargeOf(entry: JournalEntry): Promise<Charge | "later"> {
    if (entry.generationId === null) return reservationCharge(entry.reservedNano);
    const key = await this.lookupKey(entry);
    if (key === null) {
      // The user's key is gone: nothing can read the record, now or later, so no record can say.
      this.logger.warn("the user's own upstream key that paid a call is no longer linked: its reservation is charged", { requestId: entry.requestId });
      return reservationCharge(entry.reservedNano);
    }
    const record = await lookUpGeneration(this.upstream, entry.generationId, key);
    if (record.found) {
      const { costUsd, promptTokens, completionTokens } = record;
      return { costNano: usdToNanoCeil(costUsd), source: "generation", promptTokens, completionTokens, reported: { costUsd, promptTokens, completionTokens } };
    }
    const attempts = entry.attempts + 1;
    if (waitedMs(attempts) < this.options.giveUpMs) {
      await this.journal.retryLater(entry.requestId, this.owner, attempts, this.clock.now() + retryDelayMs(attempts));
      return "later";
    }
    this.logger.warn("the upstream kept no record of a call: its reservation is charged", { requestId: entry.requestId, why: record.why, attempts });
    return reservationCharge(entry.reservedNano);
  }

  /**
   * The key to look the call's generation up with: the operator's (undefined) for a call it
   * paid; the user's own for a user-funded one, reopened from the connection (the one linked now: after a
   * reconnect to another account its record is not found, and the reservation is charged once
   * the wait is over), or null when none is linked any more. A store failure throws: the round ends and the claim is taken again later.
   */
  private async lookupKey(entry: JournalEntry): Promise<string | undefined | null> {
    if (entry.payer !== "user" || entry.appUserId === null) return undefined;
    try {
      return await this.openUserKey(entry.appId, entry.appUserId);
    } catch (err) {
      // A key the secrets key cannot open stays unopenable: as good as gone.
      if (err instanceof SealedSecretError) return null;
      throw err;
    }
  }

  /** Holds that dead processes left (Redis) for calls that never went upstream: nothing to charge. */
  private async releaseUnjournaledOrphans(): Promise<void> {
    const orphans = await this.budget.orphans();
    if (orphans.length === 0) return;
    const journaled = await this.journal.journaled(orphans);
    for (const id of orphans) {
      if (journaled.has(id)) continue;
      await this.budget.settle(id, 0);
      this.stats.released++;
    }
  }
}

/** The time spent waiting once `attempts` lookups have failed. */
function waitedMs(attempts: number): number {
  let total = 0;
  for (let n = 1; n < attempts; n++) total += retryDelayMs(n);
  return total;
}

/** A grant call's second hold is on its app's day, of the day it started (src/services/chat-reservation.ts). */
const dayAccountOf = (e: JournalEntry) => grantDayAccount(e.appId, e.startedAt);

/** The call as the meter settles it, from what the journal kept of it. */
function meteredCallOf(entry: JournalEntry): MeteredCall {
  const period = periodAt(entry.startedAt);
  const target: BudgetTarget = {
    account: entry.account,
    capNano: entry.capNano,
    appId: entry.appId,
    appUserId: entry.appUserId,
    grantId: entry.grantId,
    period: { ...period, id: entry.period },
    resetsAt: period.end,
    // Only a chat call's refusal acts on the payer; settling from the journal marks no one.
    payer: entry.payer,
    markFundingInvalid: async () => {},
  };
  return {
    requestId: entry.requestId,
    ceilingReservationId: entry.ceilingReservationId,
    ceilingReservedNano: entry.ceilingReservedNano,
    ceilingCapNano: entry.ceilingCapNano,
    target,
    model: entry.model,
    streamed: entry.streamed,
    startedAt: entry.startedAt,
    reservedNano: entry.reservedNano,
  };
}
