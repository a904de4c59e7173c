import type { Connection, ConnectionRepository, FundingStatus } from "../connections";
import { num, numOrNull, type PostgresDatabase } from "./database";
import { approvalEvent, fundingInvalidEvent, revokedEvent } from "../connection-events";
import { recordWebhookEvent } from "./webhooks";

const toConnection = (r: Record<string, unknown>): Connection => ({
  appId: String(r.app_id),
  appUserId: String(r.app_user_id),
  monthlyCapNano: num(r.monthly_cap_nano),
  fundingStatus: r.funding_status as FundingStatus,
  connectedAt: num(r.connected_at),
  updatedAt: num(r.updated_at),
  revokedAt: numOrNull(r.revoked_at),
});

export class PostgresConnectionRepository implements ConnectionRepository {
  constructor(private readonly db: PostgresDatabase) {}

  async find(appId: string, appUserId: string): Promise<Connection | null> {
    const [row] = await this.db.run((sql) => sql`SELECT * FROM connections WHERE app_id = ${appId} AND app_user_id = ${appUserId}`);
    return row ? toConnection(row) : null;
  }

  async findActive(appId: string, appUserId: string): Promise<Connection | null> {
    const c = await this.find(appId, appUserId);
    return c && c.revokedAt === null ? c : null;
  }

  async approve(appId: string, appUserId: string, monthlyCapNano: number, now: number): Promise<Connection> {
    // The change and the webhook event it causes commit together (ARCHITECTURE.md §6);
    // the row lock taken by FOR UPDATE makes "before" the state this change replaced.
    return this.db.run((sql) =>
      sql.begin(async (tx) => {
        const [prior] = await tx`SELECT * FROM connections WHERE app_id = ${appId} AND app_user_id = ${appUserId} FOR UPDATE`;
        const [row] = await tx`INSERT INTO connections (app_id, app_user_id, monthly_cap_nano, funding_status, connected_at, updated_at)
          VALUES (${appId}, ${appUserId}, ${monthlyCapNano}, 'ok', ${now}, ${now})
          ON CONFLICT (app_id, app_user_id) DO UPDATE SET
            monthly_cap_nano = EXCLUDED.monthly_cap_nano,
            funding_status = 'ok',
            connected_at = CASE WHEN connections.revoked_at IS NULL THEN connections.connected_at ELSE EXCLUDED.connected_at END,
            updated_at = EXCLUDED.updated_at,
            revoked_at = NULL
          RETURNING *`;
        const after = toConnection(row);
        await recordWebhookEvent(tx, approvalEvent(prior ? toConnection(prior) : null, after), now);
        return after;
      }),
    );
  }

  async listForApp(appId: string, limit: number, afterUserId = ""): Promise<Connection[]> {
    const rows: Array<Record<string, unknown>> = await this.db.run(
      (sql) => sql`SELECT * FROM connections WHERE app_id = ${appId} AND app_user_id COLLATE "C" > ${afterUserId}
        ORDER BY app_user_id COLLATE "C" LIMIT ${limit}`,
    );
    return rows.map(toConnection);
  }

  async revoke(appId: string, appUserId: string, now: number): Promise<void> {
    await this.db.run((sql) =>
      sql.begin(async (tx) => {
        const revoked = await tx`UPDATE connections SET revoked_at = ${now}, updated_at = ${now}
          WHERE app_id = ${appId} AND app_user_id = ${appUserId} AND revoked_at IS NULL RETURNING app_id`;
        if (revoked.length > 0) await recordWebhookEvent(tx, revokedEvent(appId, appUserId), now);
      }),
    );
  }

  async markFundingInvalid(appId: string, appUserId: string, now: number): Promise<void> {
    await this.db.run((sql) =>
      sql.begin(async (tx) => {
        const marked = await tx`UPDATE connections SET funding_status = 'invalid', updated_at = ${now}
          WHERE app_id = ${appId} AND app_user_id = ${appUserId} AND funding_status = 'ok' AND revoked_at IS NULL RETURNING app_id`;
        if (marked.length > 0) await recordWebhookEvent(tx, fundingInvalidEvent(appId, appUserId), now);
      }),
    );
  }
}
