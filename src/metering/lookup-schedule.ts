/**
 * When the reconciler looks up a call's record again (src/metering/reconciler.ts). The
 * record can take a while to appear, so lookups back off; but how long it is waited for is
 * measured in time, from when the call was handed to the reconciler, not by counting the
 * steps: a lookup that hangs to its deadline, or a backlog that delays a lookup, must not
 * stretch the wait (issue 56: counted in steps, with lookups that hung, four stalled calls
 * were settled a deadline apart, which for a hundred would have held reservations for about
 * 32 hours).
 */

/** Waits between lookups of a record not there yet: 2 s after the first, doubling, at most a minute. */
export const retryDelayMs = (attempts: number): number => Math.min(60_000, 1000 * 2 ** Math.min(attempts, 6));

/**
 * After `attempts` lookups found no record, the last one ending at `now`: when to look again
 * (after the backoff, but never past the give-up time, so the last lookup is made then), or
 * null once the give-up time has come: the call is charged its reservation.
 */
export function nextLookupAt(reconcilingSince: number, giveUpMs: number, attempts: number, now: number): number | null {
  const giveUpAt = reconcilingSince + giveUpMs;
  if (now >= giveUpAt) return null;
  return Math.min(now + retryDelayMs(attempts), giveUpAt);
}
