import type Redis from "ioredis";
import type { Logger } from "../../logger";

/**
 * What a process that dies without settling (SIGKILL, OOM, power) leaves in the shared
 * Redis budgets, and how the surviving processes clean it up.
 *
 * Left behind: its open reservations, which would keep `reserved` up, and so every user's
 * remaining budget down, forever. (Spend it settled is no concern: a hold is settled only
 * once its call's ledger row is in the store, src/metering/meter.ts.)
 *
 * Each process holds a lease key renewed every second, and lists its reservations in its
 * `held` hash, written by the reserve and settle scripts in the same atomic step. Every
 * process sweeps the registry now and then: for a process whose lease ran out, one script
 * moves its holds to the `orphans` hash, where they stay counted in `reserved` (a call that
 * reached the upstream may have been billed: ARCHITECTURE.md §3 "The hard cap"). The
 * reconciler (src/metering/reconciler.ts) then settles each orphan: a journaled call at the
 * upstream's record of it (its row written first), and one whose journal entry has ended at
 * its row's cost, or at nothing when it has no row (it never went upstream). A settle still
 * arriving from a process that was only slow removes the orphan in the same step, so a hold
 * is settled once. A process whose lease ran out reserves nothing until it has renewed it
 * (./budget-scripts.ts), so no hold of it is made after its reclaim.
 *
 * The held hash, not the reservation key, carries what a reclaim needs (amount, cap, epoch,
 * account), so a reservation key expiring changes nothing.
 * Keys are reached from inside the scripts, which a single Redis (not Cluster) allows.
 */
export const LEASE_MS = 5000;
const RENEW_MS = 1000;
const SWEEP_MS = 2500;

export const processesKey = "bp:procs";
export const leaseKeyOf = (processId: string) => `bp:live:${processId}`;
export const heldKeyOf = (processId: string) => `bp:held:${processId}`;
/** Holds of dead processes, by reservation key, each "amount cap epoch account" as in `held`. */
export const orphansKey = "bp:orphans";

// KEYS: lease, held, registry, orphans. ARGV: process id. Returns the holds made orphans,
// or -1 when the lease is there after all. A settle removes its entry from `held` in the same
// step as it releases the hold, so every entry left there is a hold nobody settled.
const RECLAIM_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
local orphaned = 0
local held = redis.call('HGETALL', KEYS[2])
for i = 1, #held, 2 do
  redis.call('HSET', KEYS[4], held[i], held[i + 1])
  orphaned = orphaned + 1
end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
return orphaned
`;

// KEYS: lease, held, registry. ARGV: process id. A clean exit with nothing held leaves the
// registry at once.
const RELEASE_LUA = `
if redis.call('HLEN', KEYS[2]) > 0 then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
return 1
`;

/** This process's lease, and the sweep that reclaims what dead processes left behind. */
export class ProcessLease {
  private readonly timers: Array<ReturnType<typeof setInterval>> = [];

  constructor(
    private readonly redis: Redis,
    private readonly logger: Logger,
    /** This process's instance id: the one its journal entries name as their owner. */
    readonly id: string = crypto.randomUUID(),
  ) {
    redis.defineCommand("budgetReclaim", { numberOfKeys: 4, lua: RECLAIM_LUA });
    redis.defineCommand("budgetRelease", { numberOfKeys: 3, lua: RELEASE_LUA });
  }

  /** Renews the lease now and every RENEW_MS; sweeps now and every SWEEP_MS. Failures only log: Redis may be down. */
  start(): void {
    if (this.timers.length > 0) return;
    void this.renew();
    void this.sweep();
    this.timers.push(
      setInterval(() => void this.renew(), RENEW_MS),
      setInterval(() => void this.sweep(), SWEEP_MS),
    );
    for (const timer of this.timers) timer.unref?.();
  }

  stop(): void {
    for (const timer of this.timers.splice(0)) clearInterval(timer);
  }

  /**
   * Stops renewing and, when this process holds nothing, leaves the registry at once (the
   * others need not wait for its lease to run out). Returns whether it left.
   */
  async release(): Promise<boolean> {
    this.stop();
    try {
      const release = (this.redis as unknown as { budgetRelease(...args: string[]): Promise<number> }).budgetRelease;
      return (await release.call(this.redis, leaseKeyOf(this.id), heldKeyOf(this.id), processesKey, this.id)) === 1;
    } catch (err) {
      this.logger.warn("could not leave the budget registry; the lease will run out instead", { error: String(err) });
      return false;
    }
  }

  async renew(): Promise<void> {
    try {
      await this.redis.multi().set(leaseKeyOf(this.id), "1", "PX", LEASE_MS).sadd(processesKey, this.id).exec();
    } catch (err) {
      this.logger.debug("budget lease renewal failed", { error: String(err) });
    }
  }

  /** Reclaims every registered process whose lease is gone; returns how many holds became orphans. */
  async sweep(): Promise<number> {
    let released = 0;
    try {
      for (const other of await this.redis.smembers(processesKey)) {
        if (other === this.id) continue;
        const reclaim = (this.redis as unknown as { budgetReclaim(...args: string[]): Promise<number> }).budgetReclaim;
        const n = await reclaim.call(this.redis, leaseKeyOf(other), heldKeyOf(other), processesKey, orphansKey, other);
        if (n < 0) continue;
        released += n;
        if (n > 0) this.logger.warn("a process died holding budget reservations; they stay held until reconciled", { process: other, holds: n });
        else this.logger.info("a process's budget lease ran out, holding nothing", { process: other });
      }
    } catch (err) {
      this.logger.debug("budget lease sweep failed", { error: String(err) });
    }
    return released;
  }
}
