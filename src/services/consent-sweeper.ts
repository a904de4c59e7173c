import type { Clock } from "../clock";
import type { Logger } from "../logger";
import type { GrantRepository } from "../store/grants";
import type { FundingFlowRepository } from "../store/funding-flows";
import { PeriodicTask } from "../periodic-task";

export interface SweepSchedule {
  everyMs: number;
  /** Rows per DELETE: each statement (and its lock) stays short. */
  batchSize: number;
  /** Batches per run: a backlog is worked off over several runs, never in one long burst. */
  maxBatchesPerRun: number;
}

/** Once a minute, up to 10 000 rows of each kind a run: far above what the consent rate limits let in. */
export const CONSENT_SWEEP: SweepSchedule = { everyMs: 60_000, batchSize: 500, maxBatchesPerRun: 20 };

/**
 * Deletes the rows of consents that can no longer complete: consent requests used or past
 * their 10-minute lifetime (every opened consent page leaves one), and funding flows past
 * theirs (every redirect to the upstream's PKCE page leaves one; a completed flow deletes
 * its own). Nothing else removes them. Runs in the server process (PeriodicTask: an unref'd
 * timer; stop() waits for a run in progress, so the store can be closed after it).
 * On PostgreSQL every instance sweeps; their deletes skip each other's rows.
 */
export class ConsentRequestSweeper {
  private readonly task = new PeriodicTask(() => this.sweepAll());
  private readonly kinds: Array<{ rows: string; purge: (cutoff: number, limit: number) => Promise<number> }>;

  constructor(
    store: { grants: Pick<GrantRepository, "purgeConsentRequests">; fundingFlows: Pick<FundingFlowRepository, "purgeExpired"> },
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly schedule: SweepSchedule = CONSENT_SWEEP,
  ) {
    this.kinds = [
      { rows: "used and expired consent requests", purge: (cutoff, limit) => store.grants.purgeConsentRequests(cutoff, limit) },
      { rows: "expired funding flows", purge: (cutoff, limit) => store.fundingFlows.purgeExpired(cutoff, limit) },
    ];
  }

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

  private async sweepAll(): Promise<number> {
    let deleted = 0;
    for (const kind of this.kinds) deleted += await this.deleteBatches(kind.rows, kind.purge);
    return deleted;
  }

  /** Each kind has its own budget of batches, and a failure of one leaves the other swept. */
  private async deleteBatches(rows: string, purge: (cutoff: number, limit: number) => Promise<number>): Promise<number> {
    const { batchSize, maxBatchesPerRun } = this.schedule;
    let deleted = 0;
    try {
      for (let batch = 0; batch < maxBatchesPerRun; batch++) {
        const count = await purge(this.clock.now(), batchSize);
        deleted += count;
        if (count < batchSize) break;
        // Let requests waiting on the event loop (and, on SQLite, on the write lock) go first.
        await new Promise((resolve) => setImmediate(resolve));
      }
    } catch (err) {
      this.logger.warn(`purging ${rows} failed; the next run retries`, { error: String(err), deleted });
    }
    if (deleted > 0) this.logger.debug(`purged ${rows}`, { deleted });
    return deleted;
  }
}
