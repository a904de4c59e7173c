/**
 * Background work on a beat: a run now (`run()`, for tests and shutdown), and every
 * `everyMs` once started. A run asked for while one is under way joins it instead of
 * starting a second, so a slow run never piles up behind its own timer; `stop()` ends the
 * beat and waits for the run in flight, so what it uses (the store) can be closed after.
 * The timer is unref'd: background work never keeps a process alive by itself.
 */
export class PeriodicTask<T> {
  private timer: ReturnType<typeof setInterval> | null = null;
  private running: Promise<T> | null = null;

  /** `work` must not reject: each owner catches and logs its own failures. */
  constructor(private readonly work: () => Promise<T>) {}

  start(everyMs: number): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.run(), everyMs);
    this.timer.unref?.();
  }

  run(): Promise<T> {
    this.running ??= this.work().finally(() => (this.running = null));
    return this.running;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}
