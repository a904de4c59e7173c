/**
 * The journal of calls that may have reached the upstream (ARCHITECTURE.md §3 "The hard
 * cap": a call that reached the upstream is never released unpaid). An entry is written
 * before the call goes upstream, carries the generation id once it is known (before the
 * first byte is relayed), and goes when the call's ledger row is written (in the same
 * transaction). An entry left behind is a call whose usage this process did not see: the
 * client left and the upstream never finished, a timeout, a cut stream, or the process died.
 * The reconciler (src/metering/reconciler.ts) settles each from the upstream's own record of
 * the generation, or at its reservation when there is none, exactly once.
 */

import type { JournaledCall } from "../budget/ledger";

/**
 * What a ledger row needs that the reservation knew: enough to write the row without the
 * process that ran the call. The call's own fields are `JournaledCall`'s (src/budget/ledger.ts,
 * which a ledger that journals in its reservation's step is given).
 */
export interface JournalEntry extends JournaledCall {
  requestId: string;
  /** The process running the call, or reconciling it now (its id in the instance leases). */
  owner: string;
  account: string;
  /** What the call holds against its budget: what it is charged when the upstream keeps no record of it. */
  reservedNano: number;
  /** The cap it was reserved under (an overrun freezes the account there). */
  capNano: number;
  generationId: string | null;
  /** Null while the call runs; else why its cost must come from the upstream's record (the row's status). */
  reconcileReason: string | null;
  /** Lookups of the upstream's record made so far. */
  attempts: number;
}

/** An entry a reconciler claimed, with when its reconciling began: the reconciler gives up on its record counting from then. */
export interface ClaimedEntry extends JournalEntry {
  /** When the call was handed to the reconciler, or, for a dead owner's call still running, when it was first taken over. */
  reconcilingSince: number;
}

export interface JournalChanges {
  open: JournalEntry[];
  identify: Array<{ requestId: string; generationId: string }>;
}

export interface CallJournalRepository {
  /**
   * Records calls about to go upstream, and the upstream's generation ids of running ones,
   * in one transaction for the batch (on SQLite: one commit for a turn's calls).
   */
  record(changes: JournalChanges): Promise<void>;
  /** Hands a call to the reconciler: its usage was not seen; look from `at` on (and its reconciling began then). */
  toReconcile(requestId: string, reason: string, generationId: string | null, at: number): Promise<void>;
  /**
   * Takes up to `limit` entries that are due: this owner's handed over with their time
   * come, and any whose owner's lease has lapsed (its process died; the call's reason
   * becomes `orphanReason` unless it had one, and its reconciling begins at `now` unless it
   * had begun). Each is given to `owner` until `now + leaseMs`, so two reconcilers never work
   * on one entry at once. `orphansToo` false: this owner's alone (src/metering/lease-continuity.ts).
   */
  claimDue(owner: string, now: number, limit: number, leaseMs: number, orphanReason: string, orphansToo?: boolean): Promise<ClaimedEntry[]>;
  /** A lookup found nothing yet: try again at `at`. */
  retryLater(requestId: string, owner: string, attempts: number, at: number): Promise<void>;
  /** Entries of this owner still open (running or waiting), e.g. to hold their reservations again after a restart. */
  ownedBy(owner: string): Promise<JournalEntry[]>;
  /** Every entry whose owner is not `owner` (a process that held the store before this one), for the same purpose. */
  notOwnedBy(owner: string): Promise<JournalEntry[]>;
  find(requestId: string): Promise<JournalEntry | null>;
  /** Which of these reservation ids belong to a journaled call (as its request or as its grant-day reservation). */
  journaled(reservationIds: string[]): Promise<Set<string>>;
  /** How many entries wait for the reconciler, and how many calls run (for /metrics). */
  counts(): Promise<{ running: number; reconciling: number }>;
}

/**
 * The liveness of the processes that own journal entries (and, on PostgreSQL, budget
 * reservations): each renews its lease; an entry whose owner's lease lapsed is an orphan.
 * Leases are kept in the database's own time on PostgreSQL (one clock for every instance)
 * and in this machine's wall time on SQLite (one machine).
 */
export interface InstanceLeaseRepository {
  renew(id: string, leaseMs: number): Promise<void>;
  drop(id: string): Promise<void>;
}
