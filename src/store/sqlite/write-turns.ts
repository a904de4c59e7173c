/**
 * Turns at SQLite's single write lock between the serving thread's ledger batches and the
 * maintenance thread (./maintenance-worker.ts), in two cells of shared memory. SQLite's own
 * busy handler is no fair arbiter: a waiter sleeps 1, 2, 5… up to 100 ms between tries, and
 * a serving thread writing batch after batch kept the maintenance thread out for seconds.
 *
 * Cell HOLDER: who writes now (FREE, SERVING, MAINTENANCE). Cell WAITING: 1 while the
 * maintenance thread waits for a turn; the serving thread then lets it go first, once. The
 * maintenance thread's side of the protocol is written out in its own file (it imports
 * nothing), with the same cell numbers.
 */
export const HOLDER = 0;
export const WAITING = 1;
export const FREE = 0;
export const SERVING = 1;
export const MAINTENANCE = 2;

/** Longer than any of the maintenance thread's transactions: past it, a holder that died is taken over. */
const STUCK_MS = 2000;

export class WriteTurns {
  readonly cells = new Int32Array(new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT));

  /** Waits (without blocking the event loop) for the serving thread's turn; returns its release. */
  async take(): Promise<() => void> {
    const start = performance.now();
    // A waiting maintenance thread goes first: it waits for the lock to be free, and the
    // serving thread would otherwise take it again in the same moment, every time.
    if (Atomics.load(this.cells, WAITING) === 1) await Atomics.waitAsync(this.cells, WAITING, 1, 50).value;
    for (;;) {
      const holder = Atomics.compareExchange(this.cells, HOLDER, FREE, SERVING);
      if (holder === FREE) break;
      if (holder === MAINTENANCE && performance.now() - start > STUCK_MS) {
        // The thread died holding its turn (it is restarted apart); its transaction, if any,
        // ended with it.
        Atomics.compareExchange(this.cells, HOLDER, MAINTENANCE, FREE);
        continue;
      }
      // Held by the thread, or by another write of this one: both release with a notify.
      await Atomics.waitAsync(this.cells, HOLDER, holder, 50).value;
    }
    return this.release;
  }

  private readonly release = () => {
    Atomics.store(this.cells, HOLDER, FREE);
    Atomics.notify(this.cells, HOLDER);
  };

  /** After the thread stopped or failed: nobody holds a turn any more. */
  reset(): void {
    Atomics.store(this.cells, WAITING, 0);
    Atomics.store(this.cells, HOLDER, FREE);
    Atomics.notify(this.cells, HOLDER);
  }
}
