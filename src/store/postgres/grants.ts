import { hashToken, newConsentToken, newGrantId, newGrantToken, type ConsentRequest, type Grant, type GrantRepository } from "../grants";
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

  /** The UPDATE … RETURNING consumes the token: of two concurrent approvals, one gets the row. */
  approveConsent(consentToken: string, now: number): Promise<{ grant: Grant; grantToken: string; state: string } | null> {
    return this.db.run((sql) =>
      sql.begin(async (tx) => {
        const [consumed] = await tx`UPDATE consent_requests SET used_at = ${now}
          WHERE token_hash = ${hashed(consentToken)} AND used_at IS NULL AND expires_at > ${now}
          RETURNING app_id, usd_cap_nano, max_uses, ttl_seconds, origin, state`;
        if (!consumed) return null;
        const grantToken = newGrantToken();
        const [grant] = await tx`INSERT INTO grants (id, app_id, token_hash, usd_cap_nano, max_uses, origin, created_at, expires_at)
          VALUES (${newGrantId()}, ${consumed.app_id}, ${hashed(grantToken)}, ${consumed.usd_cap_nano}, ${consumed.max_uses}, ${consumed.origin},
                  ${now}, ${now + num(consumed.ttl_seconds) * 1000})
          RETURNING *`;
        return { grant: toGrant(grant), grantToken, state: String(consumed.state) };
      }),
    );
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
