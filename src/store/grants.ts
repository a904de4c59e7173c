import type { Database } from "bun:sqlite";
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

interface GrantRow {
  id: string;
  app_id: string;
  usd_cap_nano: number;
  max_uses: number | null;
  uses: number;
  origin: string;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
}

const toGrant = (r: GrantRow): Grant => ({
  id: r.id,
  appId: r.app_id,
  usdCapNano: r.usd_cap_nano,
  maxUses: r.max_uses,
  uses: r.uses,
  origin: r.origin,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  revokedAt: r.revoked_at,
});

/** Tokens are high-entropy random strings, so a plain SHA-256 is the right way to store them. */
export const hashToken = (token: string): Uint8Array => createHash("sha256").update(token).digest();

/** Grants and the consent requests that create them. Tokens are stored only hashed. */
export class GrantRepository {
  constructor(private readonly db: Database) {}

  /** Records what a consent page shows; returns the one-time token embedded in it. */
  createConsentRequest(request: ConsentRequest, now: number, lifetimeMs: number): string {
    const token = `ct_${randomString(40)}`;
    this.db
      .query(
        `INSERT INTO consent_requests (token_hash, app_id, usd_cap_nano, max_uses, ttl_seconds, origin, state, created_at, expires_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(hashToken(token), request.appId, request.usdCapNano, request.maxUses, request.ttlSeconds, request.origin, request.state, now, now + lifetimeMs);
    return token;
  }

  /**
   * Consumes a consent token and creates its grant, atomically: a token approves at most
   * one grant, and only before it expires. Returns null when the token is not usable.
   */
  approveConsent(consentToken: string, now: number): { grant: Grant; grantToken: string; state: string } | null {
    return this.db
      .transaction(() => {
        const consumed = this.db
          .query<{ app_id: string; usd_cap_nano: number; max_uses: number | null; ttl_seconds: number; origin: string; state: string }, [number, Uint8Array, number]>(
            `UPDATE consent_requests SET used_at = ? WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?
             RETURNING app_id, usd_cap_nano, max_uses, ttl_seconds, origin, state`,
          )
          .get(now, hashToken(consentToken), now);
        if (!consumed) return null;
        const grantToken = `gt_${randomString(40)}`;
        const id = `grt${randomString(16, LOWER_ALNUM)}`;
        this.db
          .query(
            `INSERT INTO grants (id, app_id, token_hash, usd_cap_nano, max_uses, origin, created_at, expires_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          )
          .run(id, consumed.app_id, hashToken(grantToken), consumed.usd_cap_nano, consumed.max_uses, consumed.origin, now, now + consumed.ttl_seconds * 1000);
        return { grant: this.find(id)!, grantToken, state: consumed.state };
      })
      .immediate();
  }

  consentAppId(consentToken: string): string | null {
    return (
      this.db.query<{ app_id: string }, [Uint8Array]>("SELECT app_id FROM consent_requests WHERE token_hash = ?").get(hashToken(consentToken))?.app_id ??
      null
    );
  }

  find(id: string): Grant | null {
    const row = this.db.query<GrantRow, [string]>("SELECT * FROM grants WHERE id = ?").get(id);
    return row ? toGrant(row) : null;
  }

  findByToken(token: string): Grant | null {
    const row = this.db.query<GrantRow, [Uint8Array]>("SELECT * FROM grants WHERE token_hash = ?").get(hashToken(token));
    return row ? toGrant(row) : null;
  }

  /** Counts one use, unless the grant is used up, revoked or expired (atomically). */
  consumeUse(id: string, now: number): boolean {
    const result = this.db
      .query(
        `UPDATE grants SET uses = uses + 1
         WHERE id = ? AND revoked_at IS NULL AND expires_at > ? AND (max_uses IS NULL OR uses < max_uses)`,
      )
      .run(id, now);
    return result.changes === 1;
  }

  revoke(id: string, now: number): void {
    this.db.query("UPDATE grants SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").run(now, id);
  }
}
