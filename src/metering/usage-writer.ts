import type { Logger } from "../logger";
import type { UsageLedgerRepository } from "../store/usage-ledger";
import type { UsageRow } from "../budget/usage-row";
import type { CallJournalRepository, JournalChanges } from "../store/call-journal";

export interface UsageWriterState {
  pending: number;
  written: number;
  flushes: number;
  failedFlushes: number;
  lastError: string | null;
  closed: boolean;
}

/** Resolves in a later turn of the event loop, after the I/O waiting now. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Batches ledger rows off the request path: rows queue in memory and are written in one
 * transaction per batch (one multi-row statement on PostgreSQL), when the batch is full or
 * the interval passes, whichever comes first (the pattern of TensorZero's batch writer).
 * One flush runs at a time; rows queued meanwhile go in its next batch. `close()` drains
 * the queue. A failed flush keeps its rows for the next attempt: rows are never dropped.
 * A failed batch also halves the next one, and each batch written doubles it back up to
 * `maxBatch`: a batch the store cannot finish within its statement timeout (a backlog of
 * full batches on a starved server) would otherwise fail the same way at every retry,
 * while the queue grows behind it.
 *
 * A row whose caller must know it is on disk (a JSON answer, which must survive a SIGKILL
 * once its client has it: ARCHITECTURE.md §3 "The hard cap") is queued with
 * `enqueueDurable`: its batch starts in the next turn instead of at the interval, so every
 * such row of one turn commits in one transaction (a group commit), and the promise
 * resolves when that transaction has.
 */
export class UsageWriter {
  private readonly queue: UsageRow[] = [];
  /** Rows queued with enqueueDurable, each with what to call once it is written (or its batch failed). */
  private readonly durableWaiters = new Map<UsageRow, (written: boolean) => void>();
  /** What to call once a row is written, however many attempts that takes (see onWritten). */
  private readonly writtenCallbacks = new Map<UsageRow, () => void>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** Drains running now: at most `concurrency`, each writing its own batches. */
  private readonly drains = new Set<Promise<void>>();
  private inFlightRows = 0;
  /** Queued rows whose generation ids are in the journal already (see identifyInJournal). */
  private readonly identified = new WeakSet<UsageRow>();
  /** Rows the next batch takes: maxBatch, or less after failures (see the class comment). */
  private batchRows: number;
  /** The last attempt failed: slows the retry, and makes the writer report itself failing. */
  private lastFailed = false;
  private readonly state: UsageWriterState = { pending: 0, written: 0, flushes: 0, failedFlushes: 0, lastError: null, closed: false };

  constructor(
    private readonly ledger: UsageLedgerRepository,
    private readonly logger: Logger,
    private readonly flushIntervalMs: number,
    private readonly maxBatch = 1000,
    /**
     * Batches written at once. SQLite has one writer, so 1. PostgreSQL takes 2: one batch's
     * commit waits for the disk while the other's rows are inserted (ARCHITECTURE.md §7
     * "Two writer batches on PostgreSQL"). Order does not matter: rows are keyed by request
     * id, totals add up, and each batch locks its totals rows in account order.
     */
    private readonly concurrency = 1,
    /**
     * Where a failed batch's generation ids go (see identifyInJournal). Without it (tests
     * of the writer alone), a row the store refused until its process stopped is reconciled
     * at its reservation.
     */
    private readonly journal: Pick<CallJournalRepository, "record"> | null = null,
  ) {
    this.batchRows = maxBatch;
  }

  enqueue(row: UsageRow): void {
    this.queue.push(row);
    if (this.queue.length >= this.maxBatch) void this.flush();
    else if (this.timer === null && this.drains.size === 0) this.timer = setTimeout(() => void this.flush(), this.flushIntervalMs);
  }

  /**
   * Queues a row and starts its batch in the next turn; resolves true once it is written,
   * false once a batch fails before it is written (it stays queued for the retry: the
   * caller goes on, as a caller of `enqueue` would).
   */
  enqueueDurable(row: UsageRow): Promise<boolean> {
    const written = new Promise<boolean>((resolve) => this.durableWaiters.set(row, resolve));
    this.queue.push(row);
    void this.flush();
    return written;
  }

  /**
   * Calls `then` in the same step as the batch that writes `row` succeeds (never if it is not
   * written: a process stopping with rows unwritten leaves them to the call journal). Set it
   * before the row is queued. What must follow the row and never precede it: a Redis hold's
   * settle (src/metering/meter.ts).
   */
  onWritten(row: UsageRow, then: () => void): void {
    this.writtenCallbacks.set(row, then);
  }

  /** Writes everything queued now; resolves when written, or when a failure left rows for the retry. */
  flush(): Promise<void> {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    while (this.drains.size < this.concurrency && this.queue.length > 0) {
      const drain: Promise<void> = this.drain().finally(() => {
        this.drains.delete(drain);
        if (this.drains.size > 0 || this.queue.length === 0) return;
        // A durable row queued while this drain was ending found it still running, so its
        // batch did not start: it starts now, as enqueueDurable's would have (its caller
        // waits for it). A failed drain answered every row queued before its end.
        if (this.durableWaiters.size > 0) void this.flush();
        // Rows that arrived during the last batch's write, or a failure's retry.
        else if (this.timer === null) {
          this.timer = setTimeout(() => void this.flush(), this.lastFailed ? this.flushIntervalMs * 10 : this.flushIntervalMs);
        }
      });
      this.drains.add(drain);
    }
    return Promise.all(this.drains).then(() => {});
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      // SQLite writes block the event loop for the whole transaction. Each batch starts in
      // a later turn, after the I/O that is waiting, so that a request waits for at most
      // one batch (and never runs one inline from enqueue), not for the whole queue.
      await nextTurn();
      if (this.queue.length === 0) break;
      // Taken off the queue while written, so that another drain writes other rows;
      // put back in front if the write fails.
      const batch = this.queue.splice(0, this.batchRows);
      this.inFlightRows += batch.length;
      try {
        await this.ledger.insertBatch(batch);
      } catch (err) {
        this.queue.unshift(...batch);
        this.identifyInJournal();
        // Of two drains failing at once, the smaller halving stands.
        this.batchRows = Math.min(this.batchRows, Math.max(1, Math.floor(batch.length / 2)));
        this.state.failedFlushes++;
        this.lastFailed = true;
        this.state.lastError = err instanceof Error ? err.message : String(err);
        this.logger.error("usage flush failed; rows kept for retry", { rows: this.queue.length, nextBatch: this.batchRows, error: this.state.lastError });
        // Every row still queued, not just this batch's: a row behind a batch that keeps
        // failing (smaller after each failure) would otherwise hold its caller until one works.
        this.tellWaiters(this.queue, false);
        return;
      } finally {
        this.inFlightRows -= batch.length;
      }
      this.tellWaiters(batch, true);
      this.batchRows = Math.min(this.maxBatch, this.batchRows * 2);
      this.lastFailed = false;
      this.state.written += batch.length;
      this.state.flushes++;
    }
  }

  /**
   * Drains the queue. While the store refuses, retries until `deadlineMs` has passed, then
   * gives up and says how many rows were not written (the caller is exiting).
   */
  async close(deadlineMs = 5000): Promise<void> {
    this.state.closed = true;
    const deadline = Date.now() + deadlineMs;
    for (;;) {
      await this.flush();
      if (this.queue.length === 0) break;
      if (Date.now() >= deadline) {
        this.logger.error("usage rows not written at shutdown: the store refused until the deadline", { rows: this.queue.length });
        break;
      }
      await Bun.sleep(Math.min(250, Math.max(0, deadline - Date.now())));
    }
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  /**
   * A JSON call's journal entry has no generation id: its row, written at once, was to end
   * it. Should the process stop before a retry writes the row, the reconciler could then
   * only charge the reservation, several times what the upstream billed. So once a batch
   * is refused, the ids of every row queued go to the journal, each row once, best effort
   * (a store that refuses the rows may refuse this too; then the reservation stands, as
   * for a call never answered).
   */
  private identifyInJournal(): void {
    if (!this.journal) return;
    const identify: JournalChanges["identify"] = [];
    for (const r of this.queue) {
      if (r.generationId === null || this.identified.has(r)) continue;
      this.identified.add(r);
      identify.push({ requestId: r.requestId, generationId: r.generationId });
    }
    if (identify.length === 0) return;
    this.journal.record({ open: [], identify }).catch((err: unknown) => {
      this.logger.warn("could not record a refused batch's generation ids in the call journal", { rows: identify.length, error: String(err) });
    });
  }

  private tellWaiters(batch: UsageRow[], written: boolean): void {
    if (written && this.writtenCallbacks.size > 0) {
      for (const row of batch) {
        const then = this.writtenCallbacks.get(row);
        if (!then) continue;
        this.writtenCallbacks.delete(row);
        then();
      }
    }
    if (this.durableWaiters.size === 0) return;
    for (const row of batch) {
      const waiter = this.durableWaiters.get(row);
      if (!waiter) continue;
      this.durableWaiters.delete(row);
      waiter(written);
    }
  }

  /** The last flush failed (and none has succeeded since). */
  get failing(): boolean {
    return this.lastFailed;
  }

  get stats(): UsageWriterState {
    return { ...this.state, pending: this.queue.length + this.inFlightRows };
  }
}
