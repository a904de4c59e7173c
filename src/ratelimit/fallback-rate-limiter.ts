import type { Logger } from "../logger";
import type { RateLimitDecision, RateLimiter, RateLimitRule } from "./rate-limiter";

/**
 * The shared limiter (Redis, or PostgreSQL without Redis) first; while it is down or slow,
 * the in-process limiter, so that rate limiting
 * never takes the service down (unlike budgets, which fail closed). The outage is logged
 * once when it starts and once when it ends, and shows in /healthz. Every check still
 * tries Redis first, so recovery needs no restart; with the offline queue disabled and a
 * short command timeout, a dead Redis costs a fast failure, not a wait.
 */
export class FallbackRateLimiter implements RateLimiter {
  get kind(): string {
    return this.primary.kind;
  }
  private degradedSince: number | null = null;
  private lastError: string | null = null;
  /** Checks answered by the in-process limiter since start (a metric). */
  fallbackChecks = 0;

  constructor(
    readonly primary: RateLimiter,
    private readonly fallback: RateLimiter,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  async check(rule: RateLimitRule, key: string): Promise<RateLimitDecision> {
    try {
      const decision = await this.primary.check(rule, key);
      if (this.degradedSince !== null) {
        this.logger.info(`rate limiter: ${this.primary.kind} is back; using it again`, { outageMs: this.now() - this.degradedSince });
        this.degradedSince = null;
      }
      return decision;
    } catch (err) {
      this.lastError = err instanceof Error ? err.message : String(err);
      if (this.degradedSince === null) {
        this.degradedSince = this.now();
        this.logger.warn(`rate limiter: ${this.primary.kind} unavailable; falling back to the in-process limiter`, { error: this.lastError });
      }
      this.fallbackChecks++;
      return this.fallback.check(rule, key);
    }
  }

  /** Whether checks are answered in-process now (read on every chat call: no allocation). */
  get degraded(): boolean {
    return this.degradedSince !== null;
  }

  get state(): { degraded: boolean; since: string | null; lastError: string | null } {
    return {
      degraded: this.degradedSince !== null,
      since: this.degradedSince === null ? null : new Date(this.degradedSince).toISOString(),
      lastError: this.degradedSince === null ? null : this.lastError,
    };
  }
}
