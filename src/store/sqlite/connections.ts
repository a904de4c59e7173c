import type { Database } from "bun:sqlite";
import type { Connection, ConnectionRepository, FundingStatus } from "../connections";
import { approvalEvent, fundingInvalidEvent, revokedEvent } from "../connection-events";
import { recordWebhookEvent } from "./webhooks";

interface ConnectionRow {
  app_id: string;
  app_user_id: string;
  monthly_cap_nano: number;
  funding_status: FundingStatus;
  connected_at: number;
  updated_at: number;
  revoked_at: number | null;
}

const toConnection = (r: ConnectionRow): Connection => ({
  appId: r.app_id,
  appUserId: r.app_user_id,
  monthlyCapNano: r.monthly_cap_nano,
  fundingStatus: r.funding_status,
  connectedAt: r.connected_at,
  updatedAt: r.updated_at,
  revokedAt: r.revoked_at,
});

export class SqliteConnectionRepository implements ConnectionRepository {
  private readonly findStmt;

  constructor(private readonly db: Database) {
    this.findStmt = db.query<ConnectionRow, [string, string]>("SELECT * FROM connections WHERE app_id = ? AND app_user_id = ?");
  }

  async find(appId: string, appUserId: string): Promise<Connection | null> {
    const row = this.findStmt.get(appId, appUserId);
    return row ? toConnection(row) : null;
  }

  async findActive(appId: string, appUserId: string): Promise<Connection | null> {
    const c = await this.find(appId, appUserId);
    return c && c.revokedAt === null ? c : null;
  }

  async approve(appId: string, appUserId: string, monthlyCapNano: number, now: number): Promise<Connection> {
    // The change and the webhook event it causes commit together (ARCHITECTURE.md §6).
    // IMMEDIATE: it reads before it writes, and another process sharing the file (with
    // REDIS_URL) committing in between would otherwise fail it with SQLITE_BUSY.
    return this.db
      .transaction(() => {
        const before = this.findStmt.get(appId, appUserId);
        this.db
          .query(
            `INSERT INTO connections (app_id, app_user_id, monthly_cap_nano, funding_status, connected_at, updated_at)
           VALUES (?1, ?2, ?3, 'ok', ?4, ?4)
           ON CONFLICT (app_id, app_user_id) DO UPDATE SET
             monthly_cap_nano = excluded.monthly_cap_nano,
             funding_status = 'ok',
             connected_at = CASE WHEN revoked_at IS NULL THEN connected_at ELSE excluded.connected_at END,
             updated_at = excluded.updated_at,
             revoked_at = NULL`,
          )
          .run(appId, appUserId, monthlyCapNano, now);
        const after = toConnection(this.findStmt.get(appId, appUserId)!);
        recordWebhookEvent(this.db, approvalEvent(before ? toConnection(before) : null, after), now);
        return after;
      })
      .immediate();
  }

  async listForApp(appId: string, limit: number, afterUserId = ""): Promise<Connection[]> {
    return this.db
      .query<ConnectionRow, [string, string, number]>("SELECT * FROM connections WHERE app_id = ? AND app_user_id > ? ORDER BY app_user_id LIMIT ?")
      .all(appId, afterUserId, limit)
      .map(toConnection);
  }

  async revoke(appId: string, appUserId: string, now: number): Promise<void> {
    this.db.transaction(() => {
      const revoked = this.db
        .query("UPDATE connections SET revoked_at = ?, updated_at = ? WHERE app_id = ? AND app_user_id = ? AND revoked_at IS NULL")
        .run(now, now, appId, appUserId);
      if (revoked.changes > 0) recordWebhookEvent(this.db, revokedEvent(appId, appUserId), now);
    })();
  }

  async markFundingInvalid(appId: string, appUserId: string, now: number): Promise<void> {
    this.db.transaction(() => {
      const marked = this.db
        .query(
          "UPDATE connections SET funding_status = 'invalid', updated_at = ? WHERE app_id = ? AND app_user_id = ? AND funding_status = 'ok' AND revoked_at IS NULL",
        )
        .run(now, appId, appUserId);
      if (marked.changes > 0) recordWebhookEvent(this.db, fundingInvalidEvent(appId, appUserId), now);
    })();
  }
}
