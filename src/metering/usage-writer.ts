import type { Logger } from "../logger";
import type { UsageLedgerRepository, UsageRow } from "../store/usage-ledger";

export interface UsageWriterState {
  pending: number;
  written: number;
  flushes: number;
  failedFlushes: number;
  lastError: string | null;
  closed: boolean;
}

/**
 * Batches ledger rows off the request path: rows queue in memory and are written in one
 * SQLite transaction per batch, when the batch is full or the interval passes, whichever
 * comes first (the pattern of TensorZero's batch writer). `close()` drains the queue.
 * A failed flush keeps its rows for the next attempt: rows are never dropped.
 */
export class UsageWriter {
  private queue: UsageRow[] = [];
  private timer: ReturnType<typeof setTimeout> | null = null;
  private readonly state: UsageWriterState = { pending: 0, written: 0, flushes: 0, failedFlushes: 0, lastError: null, closed: false };

  constructor(
    private readonly ledger: UsageLedgerRepository,
    private readonly logger: Logger,
    private readonly flushIntervalMs: number,
    private readonly maxBatch = 1000,
  ) {}

  enqueue(row: UsageRow): void {
    this.queue.push(row);
    if (this.queue.length >= this.maxBatch) this.flush();
    else if (this.timer === null) this.timer = setTimeout(() => this.flush(), this.flushIntervalMs);
  }

  /** Writes everything queued now. Synchronous: bun:sqlite is, and so a flush is atomic. */
  flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    while (this.queue.length > 0) {
      const batch = this.queue.length <= this.maxBatch ? this.queue : this.queue.slice(0, this.maxBatch);
      try {
        this.ledger.insertBatch(batch);
      } catch (err) {
        this.state.failedFlushes++;
        this.state.lastError = err instanceof Error ? err.message : String(err);
        this.logger.error("usage flush failed; rows kept for retry", { rows: this.queue.length, error: this.state.lastError });
        if (!this.state.closed) this.timer = setTimeout(() => this.flush(), this.flushIntervalMs * 10);
        return;
      }
      this.queue = batch === this.queue ? [] : this.queue.slice(batch.length);
      this.state.written += batch.length;
      this.state.flushes++;
    }
  }

  close(): void {
    this.state.closed = true;
    this.flush();
  }

  get stats(): UsageWriterState {
    return { ...this.state, pending: this.queue.length };
  }
}
