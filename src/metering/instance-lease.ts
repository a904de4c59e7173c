import type { Logger } from "../logger";
import type { InstanceLeaseRepository } from "../store/call-journal";
import type { LeaseContinuity } from "./lease-continuity";

/** How long a lease lasts without a renewal; the same bound as the budget ledgers' own leases. */
export const INSTANCE_LEASE_MS = 5000;
const RENEW_MS = 1000;

/**
 * This process's lease in the store: while it is renewed, its journal entries are its own;
 * once it lapses (the process died), any reconciler may take them (src/store/call-journal.ts).
 * On PostgreSQL without Redis the budget ledger keeps the same lease (same table, same id):
 * its engine says so (Counters.keepsInstanceLease, src/store/engine.ts), and src/deps.ts
 * starts no second one there.
 */
export class InstanceLease {
  private timer: ReturnType<typeof setInterval> | null = null;

  constructor(
    private readonly leases: InstanceLeaseRepository,
    readonly id: string,
    private readonly logger: Logger,
    private readonly continuity?: LeaseContinuity,
  ) {}

  /** Renews now (before the first call can be journaled) and then every second; a failed renewal only logs. */
  async start(): Promise<void> {
    await this.renew();
    this.timer ??= setInterval(() => void this.renew(), RENEW_MS);
    this.timer.unref?.();
  }

  /** A clean exit: the entries left (calls cut at the end of the shutdown's grace) are others' to reconcile at once. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.leases.drop(this.id).catch((err) => this.logger.warn("could not drop this process's lease; it will lapse instead", { error: String(err) }));
  }

  private async renew(): Promise<void> {
    try {
      await this.leases.renew(this.id, INSTANCE_LEASE_MS);
      this.continuity?.renewed(true);
    } catch (err) {
      this.continuity?.renewed(false);
      this.logger.warn("renewing this process's lease failed", { error: String(err) });
    }
  }
}
