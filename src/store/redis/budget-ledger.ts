import type Redis from "ioredis";
import { ApiError } from "../../errors";
import type { Logger } from "../../logger";
import type { BudgetAccount } from "../../budget/accounts";
import type { BudgetLedger, BudgetSnapshot, FoldedRateLimit, ReserveOutcome } from "../../budget/ledger";
import { rateLimitKeyOf } from "./rate-limiter";
import { heldKeyOf, leaseKeyOf, orphansKey, processesKey, ProcessLease } from "./process-lease";
import { SettleBatches } from "./settle-batch";
import { CONFIRM_AFTER_MS } from "./budget-scripts";
import { callBudgetFunction } from "./budget-library";
import { CountersEpoch, accountKeyOf, rebuiltKey, type TruthSource } from "./counters-epoch";

/**
 * The budget ledger shared by every process through Redis. Each account is a hash
 * {spent, reserved, epoch}; each reservation a hash {account, amount, cap, epoch, owner}
 * with a TTL. A reserve is one Lua script (with the chat rate limit folded in), and so is
 * each batch of settles (./settle-batch.ts), so they are atomic across processes: a call
 * takes one round trip and a share of a settle batch.
 *
 * Nothing is admitted against counters that may have lost data (ARCHITECTURE.md §3 "The
 * hard cap": a live counter is never lower than the truth). Every reserve checks the
 * counters' epoch against the server (./budget-scripts.ts); an account counts as loaded only
 * once it was rebuilt, in the current epoch, from the store's truth: its settled spend plus
 * the holds the call journal still lists (./counters-epoch.ts). A hold is settled only once
 * its call's row is in the store (src/metering/meter.ts), and only in its own epoch, so a
 * settle counts once whatever the order of row, settle and rebuild. Budgets fail closed:
 * Redis trouble during reserve is 503. A settle that fails is retried in the background, so
 * a reservation is not left inflating `reserved` after a short outage. The holds of a
 * process that dies before settling stay held as orphans until the reconciler settles them
 * (./process-lease.ts).
 */

/**
 * Reservation keys outlive any call, its reconciliation included (RECONCILE_GIVE_UP_SECONDS
 * is at most 7 days); the expiry only cleans up. A hold is freed by its settle (retried while
 * Redis is away) or, if its process died, by the reconciler.
 */
const RESERVATION_TTL_MS = 8 * 24 * 60 * 60 * 1000;
/** Account counters outlive their period; the store keeps the history. */
const ACCOUNT_TTL_MS = 40 * 24 * 60 * 60 * 1000;
/** Reserve attempts through epoch renewals, rebuilds and lease renewals before a 503. */
const RESERVE_ATTEMPTS = 5;

/** status, granted | spent, reserved | Redis's time, epoch; with a folded rate limit also remaining and reset (ms). */
type ReserveReply = [number, number, number, string, number?, number?];

export class RedisBudgetLedger implements BudgetLedger {
  readonly kind = "redis";
  readonly recordsRows = false;
  /** A hold is settled once its row is durable (src/metering/meter.ts): what a rebuild counts never moves again. */
  readonly settlesAfterRow = true;
  private readonly retrying = new Map<string, number>();
  /** This process's open reservations: when each reserve was sent (monotonic ms). */
  private readonly held = new Map<string, number>();
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  /** This process's lease: while it is renewed, nobody reclaims this process's holds. */
  readonly lease: ProcessLease;
  /** This process's settles, sent to Redis in batches (./settle-batch.ts). */
  readonly settles: SettleBatches;
  private readonly epoch: CountersEpoch;

  constructor(
    private readonly redis: Redis,
    truth: TruthSource,
    private readonly logger: Logger,
    /** This process's instance id (its journal entries' owner). */
    instanceId: string = crypto.randomUUID(),
  ) {
    this.lease = new ProcessLease(redis, logger, instanceId);
    this.epoch = new CountersEpoch(redis, truth, logger, { accountTtlMs: ACCOUNT_TTL_MS, reservationTtlMs: RESERVATION_TTL_MS });
    this.settles = new SettleBatches(redis, { held: heldKeyOf(this.lease.id), orphans: orphansKey, rebuilt: rebuiltKey }, ACCOUNT_TTL_MS);
    this.lease.start();
  }

  async reserve(
    account: BudgetAccount,
    requestId: string,
    capNano: number,
    minNano: number,
    desiredNano: number,
    rateLimit?: FoldedRateLimit,
  ): Promise<ReserveOutcome> {
    const accountKey = accountKeyOf(account);
    const reservationKey = reservationKeyOf(requestId);
    const keys = [CountersEpoch.key, accountKey, reservationKey, heldKeyOf(this.lease.id), processesKey, leaseKeyOf(this.lease.id)];
    const args = [capNano, minNano, desiredNano, RESERVATION_TTL_MS, ACCOUNT_TTL_MS, this.lease.id];
    const send = (): Promise<ReserveReply> =>
      rateLimit
        ? callBudgetFunction(
            this.redis,
            "reserve_limited",
            [...keys, rateLimitKeyOf(rateLimit.rule, rateLimit.key)],
            [...args, rateLimit.rule.limit, rateLimit.rule.windowMs, requestId],
          )
        : callBudgetFunction(this.redis, "reserve", keys, args);
    for (let attempt = 0; attempt < RESERVE_ATTEMPTS; attempt++) {
      const sentAt = performance.now();
      const [status, a, b, marker, remaining, resetMs] = await this.guard(send).catch((err: unknown) => {
        // Redis may have run the script before its answer was lost (a command timeout): the
        // call is refused, so a hold it may have left goes back, retried as this process's own.
        this.held.set(requestId, sentAt);
        this.retrying.set(requestId, 0);
        this.scheduleRetry();
        throw err;
      });
      if (status === -2) {
        await this.guard(() => this.epoch.renew());
        continue;
      }
      if (status === -1) {
        await this.guard(() => this.epoch.rebuild(account, marker, b));
        continue;
      }
      if (status === -3) {
        await this.lease.renew();
        continue;
      }
      const decision = rateLimit && { allowed: status !== 3, limit: rateLimit.rule.limit, remaining: remaining!, resetMs: resetMs! };
      if (status === 1) {
        this.held.set(requestId, sentAt);
        return { ok: true, grantedNano: a, rateLimit: decision };
      }
      if (status === 3) return { ok: false, spentNano: 0, reservedNano: 0, rateLimit: decision };
      if (status === 2) return { ok: false, spentNano: a, reservedNano: b, frozen: true, rateLimit: decision };
      return { ok: false, spentNano: a, reservedNano: b, rateLimit: decision };
    }
    throw new ApiError("unavailable", "the budget store could not load this budget; try again");
  }

  /**
   * Whether the call may go upstream now that it is journaled: a reserve answered quickly
   * was journaled before any rebuild could read the journal without it (REBUILD_WAIT_MS);
   * a slower one asks Redis whether its hold is still there, in this epoch.
   */
  async confirmHeld(requestId: string): Promise<boolean> {
    const sentAt = this.held.get(requestId);
    if (sentAt === undefined) return false;
    if (performance.now() - sentAt < CONFIRM_AFTER_MS) return true;
    return (await this.guard(() => callBudgetFunction<number>(this.redis, "confirm", [CountersEpoch.key, reservationKeyOf(requestId)], []))) === 1;
  }

  /**
   * Settles a hold of this process, or (the reconciler) of another: an orphan, or one a
   * rebuild made again. The caller has the call's row in the store already.
   */
  async settle(requestId: string, actualNano: number): Promise<void> {
    const own = this.held.has(requestId);
    try {
      await this.settles.settle({ reservationKey: reservationKeyOf(requestId), actualNano });
      this.held.delete(requestId);
      this.retrying.delete(requestId);
    } catch (err) {
      // Another process's hold is listed by `orphans()` until settled: the reconciler's next
      // round settles it again. This process's own is retried here.
      this.logger.warn("budget settle failed; will retry", { requestId, error: err instanceof Error ? err.message : String(err) });
      if (!own) return;
      this.retrying.set(requestId, actualNano);
      this.scheduleRetry();
    }
  }

  async close(): Promise<void> {
    await this.lease.release();
  }

  /** A dead process's holds stay in Redis (as orphans), so nothing is adopted here. */
  async adopt(): Promise<void> {}

  /** Holds nobody else will settle: dead processes' (orphans), and those a rebuild made again. */
  async orphans(): Promise<string[]> {
    const [orphaned, rebuilt] = await this.guard(() => Promise.all([this.redis.hkeys(orphansKey), this.redis.hkeys(rebuiltKey)]));
    return [...new Set([...orphaned, ...rebuilt])].map((key) => key.slice(RESERVATION_PREFIX.length));
  }

  async snapshot(account: BudgetAccount): Promise<BudgetSnapshot> {
    for (let attempt = 0; attempt < RESERVE_ATTEMPTS; attempt++) {
      const [status, a, b] = await this.guard(() =>
        callBudgetFunction<[number, number, number | string]>(this.redis, "read", [CountersEpoch.key, accountKeyOf(account)], []),
      );
      if (status === 1) return { spentNano: a, reservedNano: Number(b) };
      if (status === -2) await this.guard(() => this.epoch.renew());
      else await this.guard(() => this.epoch.rebuild(account, String(b), a));
    }
    throw new ApiError("unavailable", "the budget store could not load this budget; try again");
  }

  /** Settles still waiting for Redis to come back. */
  get pendingSettles(): number {
    return this.retrying.size;
  }

  private scheduleRetry(): void {
    if (this.retryTimer) return;
    this.retryTimer = setTimeout(async () => {
      this.retryTimer = null;
      // All at once: they go to Redis together, in as few batches as they fit.
      await Promise.all([...this.retrying].map(([requestId, actual]) => this.settle(requestId, actual)));
    }, 1000);
    this.retryTimer.unref?.();
  }

  /** Budgets fail closed: any Redis failure here is 503 `unavailable`, never a free pass. */
  private async guard<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (err instanceof ApiError) throw err;
      this.logger.warn("budget store (Redis) call failed", { error: err instanceof Error ? err.message : String(err) });
      throw new ApiError("unavailable", "the budget store is unavailable; no request is admitted without it");
    }
  }
}

const RESERVATION_PREFIX = "br:";
const reservationKeyOf = (requestId: string) => `${RESERVATION_PREFIX}${requestId}`;
