/**
 * Rate limits (ARCHITECTURE.md §2): a sliding-window log per key. Two implementations of the
 * same algorithm, in-process and Redis, behind one interface.
 */
export interface RateLimitRule {
  /** Short name, part of the key: `sessions`, `chat`. */
  name: string;
  limit: number;
  windowMs: number;
}

export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Milliseconds until the window has room again (until the oldest counted request expires). */
  resetMs: number;
}

export interface RateLimiter {
  readonly kind: string;
  check(rule: RateLimitRule, key: string): Promise<RateLimitDecision>;
}

/**
 * The in-process sliding-window log: the timestamps of admitted requests in the last
 * window, per key. Rejected requests are not logged, so a client hammering a closed
 * window does not push its own reopening further out.
 */
export class InMemoryRateLimiter implements RateLimiter {
  readonly kind = "memory";
  /** Per rule: key → timestamps of admitted requests, oldest first. */
  private readonly rules = new Map<string, { logs: Map<string, number[]>; sweepAt: number }>();

  constructor(private readonly now: () => number) {}

  async check(rule: RateLimitRule, key: string): Promise<RateLimitDecision> {
    return this.checkNow(rule, key);
  }

  checkNow(rule: RateLimitRule, key: string): RateLimitDecision {
    const now = this.now();
    const logs = this.logsOf(rule, now);
    let log = logs.get(key);
    if (!log) {
      log = [];
      logs.set(key, log);
    }
    const from = now - rule.windowMs;
    let expired = 0;
    while (expired < log.length && log[expired]! <= from) expired++;
    if (expired > 0) log.splice(0, expired);
    if (log.length >= rule.limit) {
      return { allowed: false, limit: rule.limit, remaining: 0, resetMs: Math.max(1, log[0]! + rule.windowMs - now) };
    }
    log.push(now);
    return { allowed: true, limit: rule.limit, remaining: rule.limit - log.length, resetMs: log[0]! + rule.windowMs - now };
  }

  /** The rule's logs, with idle keys dropped once a window so memory follows active keys. */
  private logsOf(rule: RateLimitRule, now: number): Map<string, number[]> {
    let entry = this.rules.get(rule.name);
    if (!entry) {
      entry = { logs: new Map(), sweepAt: now + rule.windowMs };
      this.rules.set(rule.name, entry);
    }
    if (now >= entry.sweepAt) {
      entry.sweepAt = now + rule.windowMs;
      for (const [key, log] of entry.logs) if (log.length === 0 || log[log.length - 1]! <= now - rule.windowMs) entry.logs.delete(key);
    }
    return entry.logs;
  }
}
