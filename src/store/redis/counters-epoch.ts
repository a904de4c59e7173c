import type Redis from "ioredis";
import type { Logger } from "../../logger";
import type { BudgetAccount } from "../../budget/accounts";
import type { TruthLoader } from "../../budget/truth";
import { processesKey } from "./process-lease";
import { REBUILD_LUA, REBUILD_WAIT_MS } from "./budget-scripts";
import { callBudgetFunction } from "./budget-library";

/** What the counters are rebuilt from: the store (src/store/usage-totals.ts). */
export interface TruthSource {
  /** An account's settled spend, freeze and journaled holds, in one snapshot of the store. */
  load: TruthLoader;
  /**
   * Records in the store that counters in Redis serve it; true for the first time ever (no
   * call can be in flight from an earlier epoch, so a rebuild need not wait for one).
   */
  claimFirstEpoch(): Promise<boolean>;
}

/** Holds a rebuild made again from the journal, by reservation key: the reconciler settles those whose call ended meanwhile. */
export const rebuiltKey = "bl:rebuilt";
export const accountKeyOf = (account: BudgetAccount) => `bl:${account}`;
const reservationKeyOf = (requestId: string) => `br:${requestId}`;

type Script<A extends unknown[], R> = (...args: A) => Promise<R>;
interface EpochCommands {
  budgetRebuild: Script<Array<string | number>, number>;
}

/**
 * The counters' epoch in Redis (./budget-scripts.ts), and the rebuild of an account from the
 * store's truth in it (ARCHITECTURE.md §3 "The hard cap": a live counter is never lower than
 * the truth). A process that finds the epoch lost starts the next one; an account that is not
 * of the current epoch is rebuilt before it admits anything. Both are shared by every call of
 * this process that meets them at once (one renewal, one rebuild per account).
 */
export class CountersEpoch {
  static readonly key = "bl:epoch";
  private renewing: Promise<void> | null = null;
  private readonly rebuilding = new Map<string, Promise<void>>();
  private readonly commands: EpochCommands;

  constructor(
    private readonly redis: Redis,
    private readonly truth: TruthSource,
    private readonly logger: Logger,
    private readonly ttls: { accountTtlMs: number; reservationTtlMs: number },
  ) {
    redis.defineCommand("budgetRebuild", { numberOfKeys: 4, lua: REBUILD_LUA });
    this.commands = redis as unknown as EpochCommands;
  }

  /** Starts a new epoch, unless another process has just done so. */
  renew(): Promise<void> {
    this.renewing ??= this.startEpoch().finally(() => (this.renewing = null));
    return this.renewing;
  }

  /**
   * Rebuilds the account in `marker`'s epoch, once that epoch lets rebuilds read the journal
   * (`redisNow`: Redis's time when it said the account was not loaded). Resolves when it is
   * loaded, or when the epoch moved on (the caller's next call says so).
   */
  rebuild(account: BudgetAccount, marker: string, redisNow: number): Promise<void> {
    const key = `${marker} ${account}`;
    let running = this.rebuilding.get(key);
    if (!running) {
      running = this.rebuildOnce(account, marker, redisNow).finally(() => this.rebuilding.delete(key));
      this.rebuilding.set(key, running);
    }
    return running;
  }

  private async startEpoch(): Promise<void> {
    // In the store first: once an epoch has existed, any later one waits for calls in flight.
    const first = await this.truth.claimFirstEpoch();
    const id = crypto.randomUUID();
    const marker = await callBudgetFunction<string>(this.redis, "new_epoch", [CountersEpoch.key], [id, first ? 0 : REBUILD_WAIT_MS]);
    if (marker.includes(id) && !first)
      this.logger.warn(
        "the budget counters in Redis lost data (a restart, flush, failover or restore): each budget is rebuilt from the store before its next call",
        {
          waitMs: REBUILD_WAIT_MS,
        },
      );
  }

  private async rebuildOnce(account: BudgetAccount, marker: string, redisNow: number): Promise<void> {
    const readyAt = Number(marker.slice(marker.lastIndexOf(":") + 1));
    // The truth is read only after `ready at`: any call reserved before the loss is journaled by then.
    if (readyAt > redisNow) await Bun.sleep(readyAt - redisNow);
    for (;;) {
      const truth = await this.truth.load(account);
      const args: Array<string | number> = [
        CountersEpoch.key,
        accountKeyOf(account),
        processesKey,
        rebuiltKey,
        marker,
        truth.spentNano,
        truth.frozenCapNano === null ? "" : truth.frozenCapNano,
        this.ttls.accountTtlMs,
        this.ttls.reservationTtlMs,
      ];
      for (const hold of truth.holds) args.push(reservationKeyOf(hold.requestId), hold.amountNano, hold.capNano, hold.owner);
      // -1: Redis's clock is behind ours (a sleep cut short); read again once it is not.
      if ((await this.commands.budgetRebuild(...args)) !== -1) return;
      await Bun.sleep(50);
    }
  }
}
