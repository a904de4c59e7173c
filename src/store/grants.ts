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

export type ConsentApproval =
  | { kind: "approved"; grant: Grant; grantToken: string; state: string }
  /** Unknown, expired or already used: nothing changed. */
  | { kind: "unusable" }
  /** The app was disabled after the page was shown: nothing changed, the token is still usable. */
  | { kind: "app_disabled" };

/** Grants and the consent requests that create them. Tokens are stored only hashed. */
export interface GrantRepository {
  /** Records what a consent page shows; returns the one-time token embedded in it. */
  createConsentRequest(request: ConsentRequest, now: number, lifetimeMs: number): Promise<string>;
  /**
   * Consumes a consent token and creates its grant, atomically: a token approves at most
   * one grant, only before it expires, and only while its app is enabled. (An approval
   * costs nothing: the app's daily ceiling counts what its grants spend, at reservation.)
   */
  approveConsent(consentToken: string, now: number): Promise<ConsentApproval>;
  consentAppId(consentToken: string): Promise<string | null>;
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
