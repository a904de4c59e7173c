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

/** Grants and the consent requests that create them. Tokens are stored only hashed. */
export interface GrantRepository {
  /** Records what a consent page shows; returns the one-time token embedded in it. */
  createConsentRequest(request: ConsentRequest, now: number, lifetimeMs: number): Promise<string>;
  /**
   * Consumes a consent token and creates its grant, atomically: a token approves at most
   * one grant, and only before it expires. Returns null when the token is not usable.
   */
  approveConsent(consentToken: string, now: number): Promise<{ grant: Grant; grantToken: string; state: string } | null>;
  consentAppId(consentToken: string): Promise<string | null>;
  find(id: string): Promise<Grant | null>;
  findByToken(token: string): Promise<Grant | null>;
  /** Counts one use, unless the grant is used up, revoked or expired (atomically). */
  consumeUse(id: string, now: number): Promise<boolean>;
  revoke(id: string, now: number): Promise<void>;
  /** An app's grants, oldest first, a page after `afterId` (ids sort by creation within a millisecond only roughly: the order is (created_at, id)). */
  listForApp(appId: string, limit: number, after?: { createdAt: number; id: string }): Promise<Grant[]>;
}
