/** Lets pauses and stalls end early when the stream is closed. */
export class Gate {
  closed = false;
  private wake: (() => void) | null = null;

  sleep(ms: number): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wake = null;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  forever(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => (this.wake = resolve));
  }

  close(): void {
    this.closed = true;
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}
