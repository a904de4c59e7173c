/**
 * What one engine's factory builds. SQLite (src/store/sqlite/engine.ts) and PostgreSQL
 * (src/store/postgres/engine.ts) each build a store, its change feed and the budget counters
 * and rate limits that go with it when there is no Redis; Redis (src/store/redis/engine.ts)
 * builds counters and limits that go beside either store. Where the engines differ, the
 * factory says so here, as a value: the wiring (src/deps.ts) chooses the engines once, from
 * the configuration, and nothing outside the engine folders asks which engine it has.
 */
import type { Logger } from "../logger";
import { InMemoryBudgetLedger, type BudgetLedger, type FrozenCapLoader, type SpentLoader } from "../budget/ledger";
import type { TruthLoader } from "../budget/truth";
import type { FallbackRateLimiter } from "../ratelimit/fallback-rate-limiter";
import { InMemoryRateLimiter, type RateLimiter } from "../ratelimit/rate-limiter";
import { PeriodicTask } from "../periodic-task";
import type { ChangeFeed } from "./change-feed";
import type { Store } from ".";

/** What the service builds on: the store, and the counters that go with it. */
export interface StoreEngine {
  readonly store: Store;
  /**
   * How many batches the usage writer may write at once: one on SQLite's single writer,
   * more on a pool (src/metering/usage-writer.ts).
   */
  readonly writerConcurrency: number;
  /** The budget counters and rate limits for a deployment without Redis. */
  counters(context: CountersContext): Counters;
}

/** A store engine as its factory opens it from the configuration. */
export interface OpenedStoreEngine extends StoreEngine {
  /** The feed by which this process hears of rows changed elsewhere (src/store/cached-store.ts). */
  openChangeFeed(logger: Logger): Promise<ChangeFeed>;
  /**
   * Starts the engine's own upkeep, for a process that serves (SQLite: checkpoints and the
   * ledger's per-user index in a thread of their own; src/store/sqlite/maintenance.ts).
   * Closing the store stops it.
   */
  startMaintenance(logger: Logger): void;
  /** The highest migration the database holds, read back from it. */
  schemaVersion(): Promise<number>;
}

/** Where the live budget counters are kept; /healthz reports it. */
export type BudgetBackendKind = "memory" | "postgres" | "redis";

/** What every kind of counters is built from. */
export interface CountersContext {
  readonly logger: Logger;
  readonly now: () => number;
  /** This process's id: the owner of its budget holds and of its journaled calls. */
  readonly instanceId: string;
  /** The durable totals, for counters that load an account on first use. */
  readonly loadSpent: SpentLoader;
  readonly loadFrozenCap: FrozenCapLoader;
  /** An account's settled spend and journaled holds in one snapshot: what counters that may lose data rebuild from. */
  readonly loadTruth: TruthLoader;
  /** Told of each renewal of this process's lease in the store, by counters that keep it (src/metering/lease-continuity.ts). */
  readonly leaseRenewed: (ok: boolean) => void;
  /** Records that shared counters (Redis) serve this store; true the first time ever (src/store/redis/counters-epoch.ts). */
  readonly claimFirstCountersEpoch: () => Promise<boolean>;
  /** Counters kept in this process: how long an account stays in memory unused (InMemoryBudgetLedger.forgetIdle). */
  readonly budgetIdleMs: number;
}

/** A server of their own the counters live on (Redis), reported apart from the store. */
export interface CountersServer {
  readonly name: string;
  /** Whether it answers now; while it does not, budgets answer 503 (they fail closed). */
  ready(): boolean;
}

/**
 * The live budget counters (ARCHITECTURE.md §3 "The hard cap") and the rate limiter beside
 * them, as one engine keeps them.
 */
export interface Counters {
  readonly kind: BudgetBackendKind;
  readonly ledger: BudgetLedger;
  readonly limiter: RateLimiter;
  /**
   * The limiter is shared through a server that can be down: the wiring puts this process's
   * own limiter behind it (FallbackRateLimiter), so rate limits never take the service down.
   */
  readonly limiterIsShared: boolean;
  /**
   * The ledger's reserve can run the limiter's check in the same atomic step
   * (BudgetLedger.reserve's `rateLimit`): a chat call's limit and reservation in one round trip.
   */
  readonly foldsLimiterChecks: boolean;
  /**
   * The ledger keeps this process's instance lease itself (the same id in the same table), so
   * the wiring keeps no second one (src/metering/instance-lease.ts).
   */
  readonly keepsInstanceLease: boolean;
  /** Null: the counters live in this process or in the store, and are reachable when it is. */
  readonly server: CountersServer | null;
  /**
   * Before the first reservation: registers the ledger's lease and waits, at most
   * `timeoutMs`, for the server. False when it did not answer in time (serving starts anyway).
   */
  start(timeoutMs: number): Promise<boolean>;
  /** At a clean shutdown, after the last settle and the writer's last flush. */
  close(): Promise<void>;
}

/**
 * The embedded counters: budgets and limits in this process, budgets loaded from the durable
 * totals. What SQLite uses (one process per file), and a store passed on its own.
 */
export function inProcessCounters(context: CountersContext): Counters {
  const ledger = new InMemoryBudgetLedger(context.loadSpent, context.loadFrozenCap);
  const forgetting = new PeriodicTask(() =>
    ledger.forgetIdle().catch((err) => context.logger.warn("forgetting idle budget accounts failed; retrying at the next round", { error: String(err) })),
  );
  return {
    kind: "memory",
    ledger,
    limiter: new InMemoryRateLimiter(context.now),
    limiterIsShared: false,
    foldsLimiterChecks: false,
    keepsInstanceLease: false,
    server: null,
    start: async () => {
      forgetting.start(context.budgetIdleMs);
      return true;
    },
    close: () => forgetting.stop(),
  };
}

/** A store on its own (a test's, or one wrapped to fail): counters in this process, one writer. */
export function storeAlone(store: Store): StoreEngine {
  return { store, writerConcurrency: 1, counters: inProcessCounters };
}

/**
 * What the wiring made of the counters, for those who report on them or act on them
 * (/healthz, /metrics, the rate-limit guard, start-up and shutdown): decided once.
 */
export interface BudgetBackend {
  readonly kind: BudgetBackendKind;
  readonly server: CountersServer | null;
  /** The shared limiter with its in-process fallback; null when limits are this process's own (or replaced). */
  readonly limiterFallback: FallbackRateLimiter | null;
  /**
   * Whether a chat call's rate limit can be left to its reservation now (src/http/rate-limit-macro.ts
   * DeferredRateLimit); null when it never can. Not while the limiter is falling back: the
   * ledger has no fallback, and the limiter's own check is what notices the server is back.
   */
  readonly chatLimitFoldable: (() => boolean) | null;
  /** Registers the leases and waits (bounded) for the counters' server: see Counters.start. */
  start(timeoutMs: number): Promise<boolean>;
  /** Closes the ledger and its connection, and drops this process's lease. */
  close(): Promise<void>;
}
