/** The operator's key as the last call it paid found it: refused since `since` (epoch ms), with the upstream's status then. */
export interface KeyRefusal {
  status: number;
  since: number;
}

/**
 * What the upstream made of the operator's key (UPSTREAM_API_KEY) on the chat calls this
 * process sent with it. A refusal of that key (401, 402, or 403 "Key limit exceeded": see
 * `refusesKey`) is the operator's to fix, and no user's, so it is reported where the
 * operator looks: /healthz and /readyz name it until a later call on the key is answered
 * 2xx, and /metrics counts every refusal by status.
 *
 * Per process: each instance knows only the calls it sent. It learns that the key works
 * again only from a call, so it never takes the instance out of traffic (/readyz stays 200).
 */
export class OperatorKeyState {
  private refusal: KeyRefusal | null = null;
  /** Refusals since start, by the upstream's HTTP status (a handful of keys at most: 401, 402, 403). */
  private readonly counts = new Map<number, number>();

  /** The upstream refused the key on a call. `now` is wall time: it is shown to the operator, not used for money. */
  refused(status: number, now = Date.now()): void {
    this.counts.set(status, (this.counts.get(status) ?? 0) + 1);
    this.refusal = { status, since: this.refusal?.since ?? now };
  }

  /** A call on the key was answered 2xx: whatever was wrong with it is fixed. */
  accepted(): void {
    this.refusal = null;
  }

  /** The refusal still standing, or null when the last call on the key was not refused. */
  get current(): KeyRefusal | null {
    return this.refusal;
  }

  /** Refusals since start, by HTTP status. */
  get refusalsByStatus(): ReadonlyMap<number, number> {
    return this.counts;
  }
}

/** The refusal in words an operator can act on, without the upstream's message (anyone may read /readyz). */
export function keyRefusalProblem(refusal: KeyRefusal): string {
  return (
    `the upstream refused the service's own key (UPSTREAM_API_KEY) with HTTP ${refusal.status} since ${new Date(refusal.since).toISOString()}: ` +
    "chat calls paid by it answer 502 upstream until its credit or the key is fixed (no user is marked)"
  );
}
