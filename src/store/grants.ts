import { createHash } from "node:crypto";
import { LOWER_ALNUM, randomString } from "../random";

export interface Grant {
  id: string;
  appId: string;
  usdCapNano: number;
  maxUses: number | null;
  uses: number;
  origin: string;
  createdAt: number;
  expiresAt: number;
  revokedAt: number | null;
}

export interface ConsentRequest {
  appId: string;
  usdCapNano: number;
  maxUses: number | null;
  ttlSeconds: number;
  origin: string;
  state: string;
}

/** Tokens are high-entropy random strings, so a plain SHA-256 is the right way to store them. */
export const hashToken = (token: string): Uint8Array => createHash("sha256").update(token).digest();
export const newConsentToken = () => `ct_${randomString(40)}`;
export const newGrantToken = () => `gt_${randomString(40)}`;
export const newGrantId = () => `grt${randomString(16, LOWER_ALNUM)}`;

/**
 * The per-app daily ceiling on grant dollars, a cap that holds whatever the concurrency
 * (ARCHITECTURE.md §1): the caps of an app's grants created since `dayStart` plus the
 * new one may not pass the app's own ceiling, or `defaultNano` when it has none.
 */
export interface DailyCeiling {
  dayStart: number;
  defaultNano: number;
}

export type ConsentApproval =
  | { kind: "approved"; grant: Grant; grantToken: string; state: string }
  /** Unknown, expired or already used: nothing changed. */
  | { kind: "unusable" }
  /** The app was disabled after the page was shown: nothing changed, the token is still usable. */
  | { kind: "app_disabled" }
  /** The grant would pass the app's ceiling: nothing changed, the token is still usable. */
  | { kind: "over_ceiling"; appId: string; ceilingNano: number; approvedNano: number; requestedNano: number };

/** Grants and the consent requests that create them. Tokens are stored only hashed. */
export interface GrantRepository {
  /** Records what a consent page shows; returns the one-time token embedded in it. */
  createConsentRequest(request: ConsentRequest, now: number, lifetimeMs: number): Promise<string>;
  /**
   * Consumes a consent token and creates its grant, atomically with the ceiling check: a
   * token approves at most one grant, only before it expires, and two approvals for one
   * app at once cannot both pass its ceiling (the sum and the insert are one transaction,
   * serialized per app).
   */
  approveConsent(consentToken: string, now: number, ceiling: DailyCeiling): Promise<ConsentApproval>;
  consentAppId(consentToken: string): Promise<string | null>;
  /** The caps of the app's grants created at or after `since`, revoked ones included (they may have been spent). */
  approvedSince(appId: string, since: number): Promise<number>;
  /**
   * Deletes up to `limit` consent requests that were used or expired at or before `cutoff`
   * (neither can approve anything any more); returns how many. Callers loop in batches so
   * that no one statement holds the table for long.
   */
  purgeConsentRequests(cutoff: number, limit: number): Promise<number>;
  find(id: string): Promise<Grant | null>;
  findByToken(token: string): Promise<Grant | null>;
  /** Counts one use, unless the grant is used up, revoked or expired (atomically). */
  consumeUse(id: string, now: number): Promise<boolean>;
  revoke(id: string, now: number): Promise<void>;
  /** An app's grants, oldest first, a page after `afterId` (ids sort by creation within a millisecond only roughly: the order is (created_at, id)). */
  listForApp(appId: string, limit: number, after?: { createdAt: number; id: string }): Promise<Grant[]>;
}
