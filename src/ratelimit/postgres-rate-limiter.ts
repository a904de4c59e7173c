import type { PostgresDatabase } from "../store/postgres/database";
import { num } from "../store/postgres/database";
import type { RateLimitDecision, RateLimiter, RateLimitRule } from "./rate-limiter";

/**
 * The sliding-window log in PostgreSQL, for instances that share only the database: one
 * function call per check (rate_limit_take, ../store/postgres/rate-limits-sql.ts), serialized
 * per key by its count row's lock, so the limit holds exactly across instances. Wrapped in FallbackRateLimiter: while
 * the database is down, limits fall back to each process (budgets, meanwhile, fail closed).
 */
export class PostgresRateLimiter implements RateLimiter {
  readonly kind = "postgres";
  /** Per rule: when its idle keys are next forgotten. */
  private readonly sweepAt = new Map<string, number>();

  constructor(
    private readonly db: PostgresDatabase,
    private readonly now: () => number,
  ) {}

  async check(rule: RateLimitRule, key: string): Promise<RateLimitDecision> {
    const now = this.now();
    const [r] = await this.db.run((sql) => sql`SELECT * FROM rate_limit_take(${`${rule.name}:${key}`}, ${rule.limit}, ${rule.windowMs}, ${now})`);
    if (now >= (this.sweepAt.get(rule.name) ?? 0)) this.sweepIdleKeys(rule, now);
    return { allowed: r.allowed === true, limit: rule.limit, remaining: num(r.remaining), resetMs: num(r.reset_ms) };
  }

  /** Keys that went quiet keep their last window's rows; forget those once a window, in the background. */
  private sweepIdleKeys(rule: RateLimitRule, now: number): void {
    this.sweepAt.set(rule.name, now + rule.windowMs);
    void this.db.run((sql) => sql`SELECT rate_limit_sweep(${`${rule.name}:`}, ${now - rule.windowMs})`).catch(() => {});
  }
}
