import type { PostgresDatabase } from "./database";
import { num } from "./database";
import { CallBatcher } from "../call-batcher";
import type { RateLimitDecision, RateLimiter, RateLimitRule } from "../../ratelimit/rate-limiter";

/** Most checks in one transaction. */
const MAX_BATCH = 256;

/** One check as rate_limit_take_many (and budget_reserve_limited_many's "check") take it. */
export interface CheckItem {
  key: string;
  limit: number;
  window: number;
  now: number;
}

type Taken = Pick<RateLimitDecision, "allowed" | "remaining" | "resetMs">;

/**
 * The sliding-window log in PostgreSQL, for instances that share only the database
 * (../store/postgres/rate-limits-sql.ts), serialized per key by its count row's lock, so
 * the limit holds exactly across instances. Checks that arrive while the previous batch is
 * under way go together in the next: rate_limit_take_many
 * (../store/postgres/rate-limits-batch-sql.ts) decides each as a check of its own would
 * be, in order, with the key's row locked and written once per batch. Wrapped in
 * FallbackRateLimiter: while the database is down, limits fall back to each process
 * (budgets, meanwhile, fail closed).
 */
export class PostgresRateLimiter implements RateLimiter {
  readonly kind = "postgres";
  /** Per rule: when its idle keys are next forgotten. */
  private readonly sweepAt = new Map<string, number>();
  private readonly checks = new CallBatcher<CheckItem, Taken>((items) => this.checkMany(items), MAX_BATCH);

  constructor(
    private readonly db: PostgresDatabase,
    private readonly now: () => number,
  ) {}

  async check(rule: RateLimitRule, key: string): Promise<RateLimitDecision> {
    const item = this.checkItem(rule, key);
    const taken = await this.checks.call(item);
    this.answered(rule, item);
    return { limit: rule.limit, ...taken };
  }

  /**
   * A check for another statement to take, the budget reservation's
   * (src/store/postgres/budget-ledger.ts), which calls `answered` once it has its answer.
   */
  checkItem(rule: RateLimitRule, key: string): CheckItem {
    return { key: `${rule.name}:${key}`, limit: rule.limit, window: rule.windowMs, now: this.now() };
  }

  /**
   * A check of `rule` was answered: forget the rule's idle keys if it is time. Only then,
   * not when the check is made: batches go in order, so every check stamped before this one
   * has been decided, and none can still need a hit the sweep forgets.
   */
  answered(rule: RateLimitRule, item: CheckItem): void {
    if (item.now >= (this.sweepAt.get(rule.name) ?? 0)) this.sweepIdleKeys(rule, item.now);
  }

  private async checkMany(items: CheckItem[]): Promise<Taken[]> {
    const rows = await this.db.run((sql) => sql`SELECT item, allowed, remaining, reset_ms FROM rate_limit_take_many(${JSON.stringify(items)}::text::jsonb)`);
    if (rows.length !== items.length) throw new Error(`rate_limit_take_many answered ${rows.length} of ${items.length} checks`);
    const taken = new Array<Taken>(items.length);
    for (const r of rows) taken[num(r.item)] = { allowed: r.allowed === true, remaining: num(r.remaining), resetMs: num(r.reset_ms) };
    return taken;
  }

  /** Keys that went quiet keep their last window's rows; forget those once a window, in the background. */
  private sweepIdleKeys(rule: RateLimitRule, now: number): void {
    this.sweepAt.set(rule.name, now + rule.windowMs);
    void this.db.run((sql) => sql`SELECT rate_limit_sweep(${`${rule.name}:`}, ${now - rule.windowMs})`).catch(() => {});
  }
}
