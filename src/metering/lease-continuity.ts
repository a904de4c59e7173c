/**
 * Whether this process has held its lease in the store without a break for long enough to
 * take other processes' journal entries as a dead one's (src/metering/reconciler.ts).
 *
 * Why: an outage of a shared store longer than a lease lets every instance's lease lapse,
 * though none died. The first reconciler round after it would take the calls of owners that
 * are alive, still holding those calls' usage and retrying their rows, and charge the JSON
 * ones (no generation id to look up) their reservations: the ledger ended above the
 * upstream's bill (issue 56). An owner that is alive renews within a second of the store
 * coming back, so a process takes others' entries only once its own renewals have succeeded
 * without a failure for ORPHANS_AFTER_MS; an owner whose lease is still lapsed by then is dead.
 * (An owner cut off alone, by a partition, is not told apart from a dead one.)
 */

/** Two leases' worth of unbroken renewals (INSTANCE_LEASE_MS, the budget ledgers' LEASE_MS: 5 s). */
export const ORPHANS_AFTER_MS = 10_000;

export class LeaseContinuity {
  /** Since when renewals have all succeeded: from the start (no failure seen yet) until the first failure. */
  private since: number | null = Number.NEGATIVE_INFINITY;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Told of every renewal of this process's lease in the store. */
  renewed(ok: boolean): void {
    if (!ok) this.since = null;
    else this.since ??= this.now();
  }

  /** Whether another process's lapsed lease now means that it died. */
  mayTakeOthers(): boolean {
    return this.since !== null && this.now() - this.since >= ORPHANS_AFTER_MS;
  }
}
