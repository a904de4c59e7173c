import type { Logger } from "../logger";
import type { ClaimedEntry } from "../store/call-journal";

/** Claims in a row while slots keep freeing: a bound, so a fill ends (the next poll, or a freed slot, goes on). */
const MAX_CLAIMS_PER_FILL = 10;

/**
 * The reconciler's slots (src/metering/reconciler.ts): a fixed number of calls reconciled
 * side by side, as the webhook dispatcher runs its sends. A fill claims only what it can
 * start at once, so no claimed call waits for a slot: a claim's lease needs to outlive one
 * call's lookup and settle, not a queue's. No fill waits for the work it starts; a call that
 * is done frees its slot and fills it again at once, so a lookup that hangs holds its own
 * slot and nothing else.
 */
export class ReconcileSlots {
  /** The calls claimed and at work, by request id. */
  private readonly working = new Map<string, Promise<void>>();
  /** The claims under way, if any: one at a time, so the free slots a claim counts are exact. */
  private claiming: Promise<void> | null = null;
  /** A slot freed while claims were under way: claim once more before ending. */
  private claimAgain = false;
  private stopped = false;

  constructor(
    private readonly size: number,
    /** Takes up to `room` calls due now. */
    private readonly claim: (room: number) => Promise<ClaimedEntry[]>,
    /** One call's lookup and settle; a failure is logged, the entry left as its claim left it. */
    private readonly work: (entry: ClaimedEntry) => Promise<void>,
    private readonly logger: Logger,
  ) {}

  /**
   * Claims until a claim finds nothing new to start. Asked for while running, it joins and
   * makes the running one claim again, so a slot freed at any moment is used.
   */
  fill(): Promise<void> {
    if (this.claiming) {
      this.claimAgain = true;
      return this.claiming;
    }
    const claims = async () => {
      try {
        // Nothing is awaited between the last check of claimAgain and `claiming = null`: no request is lost.
        for (let i = 0; i < MAX_CLAIMS_PER_FILL && !this.stopped; i++) {
          this.claimAgain = false;
          await this.claimAndStart();
          if (!this.claimAgain) break;
        }
      } catch (err) {
        this.logger.warn("claiming calls to reconcile failed; retrying at the next poll", { error: String(err) });
      } finally {
        this.claiming = null;
      }
    };
    this.claiming = claims();
    return this.claiming;
  }

  /** Until no claim is under way and no call at work, both seen at the same moment. */
  async idle(): Promise<void> {
    for (;;) {
      if (this.claiming) await this.claiming;
      else if (this.working.size > 0) await Promise.allSettled(this.working.values());
      else return;
    }
  }

  /** Claims no more (the work in hand goes on); resolves once the claim under way is done. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.claiming) await this.claiming;
  }

  start(): void {
    this.stopped = false;
  }

  private async claimAndStart(): Promise<void> {
    const room = this.size - this.working.size;
    if (room <= 0) return;
    const due = await this.claim(room);
    // One still at work (its claim lapsed meanwhile) is not started twice.
    for (const entry of due) if (!this.working.has(entry.requestId)) this.begin(entry);
  }

  private begin(entry: ClaimedEntry): void {
    const { requestId } = entry;
    const done = this.work(entry)
      .catch((err) => this.logger.warn("reconciling a call failed; it is taken again once its claim lapses", { requestId, error: String(err) }))
      .finally(() => {
        this.working.delete(requestId);
        // The freed slot goes to a call due now, not at the next poll.
        if (!this.stopped) void this.fill();
      });
    this.working.set(requestId, done);
  }
}
