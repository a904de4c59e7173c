/** Time source; tests inject a fake to cross period boundaries and expire tokens. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that only moves when told to; for tests. */
export class ManualClock implements Clock {
  constructor(private ms: number = Date.UTC(2026, 0, 15)) {}
  now(): number {
    return this.ms;
  }
  set(ms: number): void {
    this.ms = ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}
