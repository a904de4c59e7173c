import type { Clock } from "../clock";
import type { Logger } from "../logger";
import { usdToNanoCeil } from "../money";
import type { ClaimedEntry } from "../store/call-journal";
import type { UpstreamClient } from "../upstream/client";
import { lookUpGeneration } from "../upstream/generation-record";
import { reservationCharge, type Charge } from "../pricing/reservation";
import { SealedSecretError } from "../secrets/secret-box";
import { nextLookupAt } from "./lookup-schedule";

/**
 * Opens a user's own upstream key (the store's `userUpstreamKey`) for looking up a call it
 * paid; null when the connection has no key any more (revoked, or relinked to the operator).
 */
export type OpenUserKey = (appId: string, appUserId: string) => Promise<string | null>;

/** What looking up a claimed call's record needs. */
export interface RecordLookup {
  upstream: UpstreamClient;
  openUserKey: OpenUserKey;
  clock: Clock;
  logger: Logger;
  /** How long the record is waited for, from the call's hand-over (RECONCILE_GIVE_UP_SECONDS). */
  giveUpMs: number;
}

/** The row's status of a call whose process died before it was settled (or that lost its lease). */
export const INSTANCE_DIED = "instance_died";

/**
 * What a call the reconciler claimed is charged: the upstream's record's cost, or its whole
 * reservation (no generation id, no key left to read the record with, or no record by the
 * give-up time); or, while the record may still come, when to look again (./lookup-schedule.ts).
 * The lookup is bounded by the upstream client's own deadline on a GET (UPSTREAM_TIMEOUT_MS).
 */
export async function chargeOfClaimed(entry: ClaimedEntry, lookup: RecordLookup): Promise<Charge | { retryAt: number }> {
  if (entry.generationId === null) return reservationCharge(entry.reservedNano);
  const key = await lookupKey(entry, lookup.openUserKey);
  if (key === null) {
    // The user's key is gone: nothing can read the record, now or later, so no record can say.
    lookup.logger.warn("the user's own upstream key that paid a call is no longer linked: its reservation is charged", { requestId: entry.requestId });
    return reservationCharge(entry.reservedNano);
  }
  const record = await lookUpGeneration(lookup.upstream, entry.generationId, key);
  if (record.found) {
    const { costUsd, promptTokens, completionTokens } = record;
    return { costNano: usdToNanoCeil(costUsd), source: "generation", promptTokens, completionTokens, reported: { costUsd, promptTokens, completionTokens } };
  }
  const attempts = entry.attempts + 1;
  // The time after the lookup, which may have taken up to its deadline.
  const retryAt = nextLookupAt(entry.reconcilingSince, lookup.giveUpMs, attempts, lookup.clock.now());
  if (retryAt !== null) return { retryAt };
  lookup.logger.warn("the upstream kept no record of a call: its reservation is charged", { requestId: entry.requestId, why: record.why, attempts });
  return reservationCharge(entry.reservedNano);
}

/**
 * The key to look the call's generation up with: the operator's (undefined) for a call it
 * paid; the user's own for a user-funded one, reopened from the connection (the one linked now: after a
 * reconnect to another account its record is not found, and the reservation is charged once
 * the wait is over), or null when none is linked any more. A store failure throws: the call is taken again once its claim lapses.
 */
async function lookupKey(entry: ClaimedEntry, openUserKey: OpenUserKey): Promise<string | undefined | null> {
  if (entry.payer !== "user" || entry.appUserId === null) return undefined;
  try {
    return await openUserKey(entry.appId, entry.appUserId);
  } catch (err) {
    // A key the secrets key cannot open stays unopenable: as good as gone.
    if (err instanceof SealedSecretError) return null;
    throw err;
  }
}
