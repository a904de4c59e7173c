/**
 * Timers on a fake clock for the price list's refresh beat (src/pricing/catalogue.ts
 * RefreshTimers): nothing runs until the test moves the clock on, so a beat of seconds or
 * minutes is tested without waiting.
 */
import type { RefreshTimers } from "../../src/pricing/catalogue";

/** A clock whose timers run only when it is moved on. */
export class FakeTimers implements RefreshTimers {
  private at = Date.UTC(2026, 0, 15, 12);
  private seq = 0;
  private readonly pending = new Map<number, { due: number; run: () => void }>();
  now(): number {
    return this.at;
  }
  setTimeout(run: () => void, ms: number): unknown {
    this.pending.set(++this.seq, { due: this.at + ms, run });
    return this.seq;
  }
  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  /** How far ahead each pending timer is. */
  get delays(): number[] {
    return [...this.pending.values()].map((p) => p.due - this.at);
  }
  /** Moves the clock on by `ms`, running each timer as it falls due. */
  advance(ms: number): void {
    const end = this.at + ms;
    for (;;) {
      const next = [...this.pending].filter(([, p]) => p.due <= end).sort(([, a], [, b]) => a.due - b.due)[0];
      if (!next) break;
      this.pending.delete(next[0]);
      this.at = next[1].due;
      next[1].run();
    }
    this.at = end;
  }
}
