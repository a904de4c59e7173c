import type { Clock } from "../clock";
import type { Logger } from "../logger";
import type { GrantRepository } from "../store/grants";
import { PeriodicTask } from "../periodic-task";

export interface SweepSchedule {
  everyMs: number;
  /** Rows per DELETE: each statement (and its lock) stays short. */
  batchSize: number;
  /** Batches per run: a backlog is worked off over several runs, never in one long burst. */
  maxBatchesPerRun: number;
}

/** Once a minute, up to 10 000 rows a run: far above what the consent rate limits let in. */
export const CONSENT_SWEEP: SweepSchedule = { everyMs: 60_000, batchSize: 500, maxBatchesPerRun: 20 };

/**
 * Deletes consent requests that can no longer approve anything (used, or past their
 * 10-minute lifetime): every opened consent page leaves a row, and nothing else removes
 * them. Runs in the server process (PeriodicTask: an unref'd timer; stop() waits for a run
 * in progress, so the store can be closed after it).
 * On PostgreSQL every instance sweeps; their deletes skip each other's rows.
 */
export class ConsentRequestSweeper {
  private readonly task = new PeriodicTask(() => this.deleteBatches());

  constructor(
    private readonly grants: Pick<GrantRepository, "purgeConsentRequests">,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly schedule: SweepSchedule = CONSENT_SWEEP,
  ) {}

  /** Sweeps now, then every `everyMs`. */
  start(): void {
    this.task.start(this.schedule.everyMs);
    void this.sweep();
  }

  /** One run (joined while another is under way): returns how many rows it deleted. Never throws; failures are logged. */
  sweep(): Promise<number> {
    return this.task.run();
  }

  /** Stops the timer and waits for a run in progress. */
  stop(): Promise<void> {
    return this.task.stop();
  }

  private async deleteBatches(): Promise<number> {
    const { batchSize, maxBatchesPerRun } = this.schedule;
    let deleted = 0;
    try {
      for (let batch = 0; batch < maxBatchesPerRun; batch++) {
        const count = await this.grants.purgeConsentRequests(this.clock.now(), batchSize);
        deleted += count;
        if (count < batchSize) break;
        // Let requests waiting on the event loop (and, on SQLite, on the write lock) go first.
        await new Promise((resolve) => setImmediate(resolve));
      }
    } catch (err) {
      this.logger.warn("purging used and expired consent requests failed; the next run retries", { error: String(err), deleted });
    }
    if (deleted > 0) this.logger.debug("purged used and expired consent requests", { deleted });
    return deleted;
  }
}
