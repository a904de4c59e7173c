/**
 * What the mock upstream served, kept small for a long run. The mock pushes one full entry
 * (headers, parsed body…) per chat request into its `served` array at arrival and updates
 * it as the response ends; every second this moves the entries into a map of the few
 * fields the final check needs and empties the array.
 */
import type { ServedRequest } from "../../packages/mock-upstream/src";

export interface ServedSummary {
  status: number;
  stream: boolean;
  completed: boolean;
  aborted: boolean;
}

export class ServedTracker {
  /** Generation id → what happened to it (updated until the entry is final). */
  readonly byId = new Map<string, ServedSummary>();
  /** Entries whose response has not ended yet: re-read on every sweep. */
  private open: ServedRequest[] = [];
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(private readonly log: ServedRequest[]) {
    this.timer = setInterval(() => this.sweep(), 1000);
  }

  /** Moves new entries out of the mock's log and refreshes the ones still open. */
  sweep(): void {
    const fresh = this.log.splice(0);
    const stillOpen: ServedRequest[] = [];
    for (const entry of [...this.open, ...fresh]) {
      const final = entry.status !== 200 || entry.completed || entry.aborted;
      this.byId.set(entry.id, { status: entry.status, stream: entry.stream, completed: entry.completed, aborted: entry.aborted });
      if (!final) stillOpen.push(entry);
    }
    this.open = stillOpen;
  }

  /** Responses the mock has started and not yet ended. */
  get openCount(): number {
    return this.open.length;
  }

  stop(): void {
    clearInterval(this.timer);
    this.sweep();
  }
}
