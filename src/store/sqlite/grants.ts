import type { Database } from "bun:sqlite";
import { hashToken, newConsentToken, newGrantId, newGrantToken, type ConsentApproval, type ConsentRequest, type Grant, type GrantRepository } from "../grants";

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

interface ConsentRow {
  app_id: string;
  usd_cap_nano: number;
  max_uses: number | null;
  ttl_seconds: number;
  origin: string;
  state: string;
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

export class SqliteGrantRepository implements GrantRepository {
  constructor(private readonly db: Database) {}

  async createConsentRequest(request: ConsentRequest, now: number, lifetimeMs: number): Promise<string> {
    const token = newConsentToken();
    this.db
      .query(
        `INSERT INTO consent_requests (token_hash, app_id, usd_cap_nano, max_uses, ttl_seconds, origin, state, created_at, expires_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(hashToken(token), request.appId, request.usdCapNano, request.maxUses, request.ttlSeconds, request.origin, request.state, now, now + lifetimeMs);
    return token;
  }

  /**
   * BEGIN IMMEDIATE takes the database's write lock before the first read, so the token
   * cannot be used twice, in this process or another.
   */
  async approveConsent(consentToken: string, now: number): Promise<ConsentApproval> {
    return this.db
      .transaction((): ConsentApproval => {
        const tokenHash = hashToken(consentToken);
        const pending = this.db
          .query<ConsentRow, [Uint8Array, number]>(
            `SELECT app_id, usd_cap_nano, max_uses, ttl_seconds, origin, state FROM consent_requests
             WHERE token_hash = ? AND used_at IS NULL AND expires_at > ?`,
          )
          .get(tokenHash, now);
        if (!pending) return { kind: "unusable" };
        const app = this.db.query<{ disabled_at: number | null }, [string]>("SELECT disabled_at FROM apps WHERE id = ?").get(pending.app_id);
        if (!app || app.disabled_at !== null) return { kind: "app_disabled" };
        this.db.query("UPDATE consent_requests SET used_at = ? WHERE token_hash = ?").run(now, tokenHash);
        const grantToken = newGrantToken();
        const id = newGrantId();
        this.db
          .query(
            `INSERT INTO grants (id, app_id, token_hash, usd_cap_nano, max_uses, origin, created_at, expires_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          )
          .run(id, pending.app_id, hashToken(grantToken), pending.usd_cap_nano, pending.max_uses, pending.origin, now, now + pending.ttl_seconds * 1000);
        const grant = toGrant(this.db.query<GrantRow, [string]>("SELECT * FROM grants WHERE id = ?").get(id)!);
        return { kind: "approved", grant, grantToken, state: pending.state };
      })
      .immediate();
  }

  async purgeConsentRequests(cutoff: number, limit: number): Promise<number> {
    // The expression is spelled as in the index consent_requests_by_end, so the index serves it.
    return this.db
      .query(
        `DELETE FROM consent_requests WHERE rowid IN (
           SELECT rowid FROM consent_requests WHERE COALESCE(used_at, expires_at) <= ? LIMIT ?)`,
      )
      .run(cutoff, limit).changes;
  }

  async consentAppId(consentToken: string): Promise<string | null> {
    return (
      this.db.query<{ app_id: string }, [Uint8Array]>("SELECT app_id FROM consent_requests WHERE token_hash = ?").get(hashToken(consentToken))?.app_id ?? null
    );
  }

  async find(id: string): Promise<Grant | null> {
    const row = this.db.query<GrantRow, [string]>("SELECT * FROM grants WHERE id = ?").get(id);
    return row ? toGrant(row) : null;
  }

  async findByToken(token: string): Promise<Grant | null> {
    const row = this.db.query<GrantRow, [Uint8Array]>("SELECT * FROM grants WHERE token_hash = ?").get(hashToken(token));
    return row ? toGrant(row) : null;
  }

  async consumeUse(id: string, now: number): Promise<boolean> {
    const result = this.db
      .query(
        `UPDATE grants SET uses = uses + 1
         WHERE id = ? AND revoked_at IS NULL AND expires_at > ? AND (max_uses IS NULL OR uses < max_uses)`,
      )
      .run(id, now);
    return result.changes === 1;
  }

  async listForApp(appId: string, limit: number, after?: { createdAt: number; id: string }): Promise<Grant[]> {
    const from = after ?? { createdAt: -1, id: "" };
    return this.db
      .query<GrantRow, [string, number, number, string, number]>(
        "SELECT * FROM grants WHERE app_id = ? AND (created_at > ? OR (created_at = ? AND id > ?)) ORDER BY created_at, id LIMIT ?",
      )
      .all(appId, from.createdAt, from.createdAt, from.id, limit)
      .map(toGrant);
  }

  async revoke(id: string, now: number): Promise<void> {
    this.db.query("UPDATE grants SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").run(now, id);
  }
}
