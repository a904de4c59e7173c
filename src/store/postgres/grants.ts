import { hashToken, newConsentToken, newGrantId, newGrantToken, type ConsentApproval, type ConsentRequest, type Grant, type GrantRepository } from "../grants";
import { num, numOrNull, type PostgresDatabase } from "./database";

const toGrant = (r: Record<string, unknown>): Grant => ({
  id: String(r.id),
  appId: String(r.app_id),
  usdCapNano: num(r.usd_cap_nano),
  maxUses: numOrNull(r.max_uses),
  uses: num(r.uses),
  origin: String(r.origin),
  createdAt: num(r.created_at),
  expiresAt: num(r.expires_at),
  revokedAt: numOrNull(r.revoked_at),
});

const hashed = (token: string) => Buffer.from(hashToken(token));

export class PostgresGrantRepository implements GrantRepository {
  constructor(private readonly db: PostgresDatabase) {}

  async createConsentRequest(request: ConsentRequest, now: number, lifetimeMs: number): Promise<string> {
    const token = newConsentToken();
    await this.db.run(
      (sql) => sql`INSERT INTO consent_requests (token_hash, app_id, usd_cap_nano, max_uses, ttl_seconds, origin, state, created_at, expires_at)
        VALUES (${hashed(token)}, ${request.appId}, ${request.usdCapNano}, ${request.maxUses}, ${request.ttlSeconds}, ${request.origin},
                ${request.state}, ${now}, ${now + lifetimeMs})`,
    );
    return token;
  }

  /**
   * One transaction: the consent row FOR UPDATE, so that of two approvals of one token the
   * second waits, then finds it used (READ COMMITTED re-checks the row) and approves nothing.
   */
  approveConsent(consentToken: string, now: number): Promise<ConsentApproval> {
    const tokenHash = hashed(consentToken);
    return this.db.run((sql) =>
      sql.begin(async (tx): Promise<ConsentApproval> => {
        const [pending] = await tx`SELECT app_id, usd_cap_nano, max_uses, ttl_seconds, origin, state FROM consent_requests
          WHERE token_hash = ${tokenHash} AND used_at IS NULL AND expires_at > ${now} FOR UPDATE`;
        if (!pending) return { kind: "unusable" };
        const appId = String(pending.app_id);
        const [app] = await tx`SELECT disabled_at FROM apps WHERE id = ${appId}`;
        if (!app || app.disabled_at !== null) return { kind: "app_disabled" };
        const requestedNano = num(pending.usd_cap_nano);
        await tx`UPDATE consent_requests SET used_at = ${now} WHERE token_hash = ${tokenHash}`;
        const grantToken = newGrantToken();
        const [grant] = await tx`INSERT INTO grants (id, app_id, token_hash, usd_cap_nano, max_uses, origin, created_at, expires_at)
          VALUES (${newGrantId()}, ${appId}, ${hashed(grantToken)}, ${requestedNano}, ${pending.max_uses}, ${pending.origin},
                  ${now}, ${now + num(pending.ttl_seconds) * 1000})
          RETURNING *`;
        return { kind: "approved", grant: toGrant(grant), grantToken, state: String(pending.state) };
      }),
    );
  }

  /** SKIP LOCKED: instances purging at once share the work, and a row being approved is left alone. */
  async purgeConsentRequests(cutoff: number, limit: number): Promise<number> {
    const rows = await this.db.run(
      (sql) => sql`DELETE FROM consent_requests WHERE token_hash IN (
          SELECT token_hash FROM consent_requests WHERE COALESCE(used_at, expires_at) <= ${cutoff} LIMIT ${limit} FOR UPDATE SKIP LOCKED)
        RETURNING 1`,
    );
    return rows.length;
  }

  async consentAppId(consentToken: string): Promise<string | null> {
    const [row] = await this.db.run((sql) => sql`SELECT app_id FROM consent_requests WHERE token_hash = ${hashed(consentToken)}`);
    return row ? String(row.app_id) : null;
  }

  async find(id: string): Promise<Grant | null> {
    const [row] = await this.db.run((sql) => sql`SELECT * FROM grants WHERE id = ${id}`);
    return row ? toGrant(row) : null;
  }

  async findByToken(token: string): Promise<Grant | null> {
    const [row] = await this.db.run((sql) => sql`SELECT * FROM grants WHERE token_hash = ${hashed(token)}`);
    return row ? toGrant(row) : null;
  }

  async consumeUse(id: string, now: number): Promise<boolean> {
    const rows = await this.db.run(
      (sql) => sql`UPDATE grants SET uses = uses + 1
        WHERE id = ${id} AND revoked_at IS NULL AND expires_at > ${now} AND (max_uses IS NULL OR uses < max_uses) RETURNING id`,
    );
    return rows.length === 1;
  }

  async listForApp(appId: string, limit: number, after?: { createdAt: number; id: string }): Promise<Grant[]> {
    const from = after ?? { createdAt: -1, id: "" };
    const rows: Array<Record<string, unknown>> = await this.db.run(
      (sql) => sql`SELECT * FROM grants WHERE app_id = ${appId} AND (created_at, id) > (${from.createdAt}, ${from.id}) ORDER BY created_at, id LIMIT ${limit}`,
    );
    return rows.map(toGrant);
  }

  async revoke(id: string, now: number): Promise<void> {
    await this.db.run((sql) => sql`UPDATE grants SET revoked_at = ${now} WHERE id = ${id} AND revoked_at IS NULL`);
  }
}
