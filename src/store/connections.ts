import type { Database } from "bun:sqlite";

export type FundingStatus = "ok" | "invalid";

export interface Connection {
  appId: string;
  appUserId: string;
  monthlyCapNano: number;
  fundingStatus: FundingStatus;
  connectedAt: number;
  updatedAt: number;
  revokedAt: number | null;
}

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

/** A user's approval of a monthly cap for one app. Every query is scoped by app id. */
export class ConnectionRepository {
  private readonly findStmt;

  constructor(private readonly db: Database) {
    this.findStmt = db.query<ConnectionRow, [string, string]>(
      "SELECT * FROM connections WHERE app_id = ? AND app_user_id = ?",
    );
  }

  /** The connection row, active or revoked; null if the user never connected. */
  find(appId: string, appUserId: string): Connection | null {
    const row = this.findStmt.get(appId, appUserId);
    return row ? toConnection(row) : null;
  }

  /** The connection if it is active (not revoked). */
  findActive(appId: string, appUserId: string): Connection | null {
    const c = this.find(appId, appUserId);
    return c && c.revokedAt === null ? c : null;
  }

  /**
   * Approves or updates: sets the cap, clears a funding_invalid state and un-revokes.
   * A fresh approval after a revoke counts as a new connection (connectedAt moves).
   */
  approve(appId: string, appUserId: string, monthlyCapNano: number, now: number): Connection {
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
    return this.find(appId, appUserId)!;
  }

  /** Revokes; revoking an absent or already revoked connection is a no-op. */
  revoke(appId: string, appUserId: string, now: number): void {
    this.db
      .query(
        "UPDATE connections SET revoked_at = ?, updated_at = ? WHERE app_id = ? AND app_user_id = ? AND revoked_at IS NULL",
      )
      .run(now, now, appId, appUserId);
  }

  /** Marks the connection's funding invalid (upstream said payment required). */
  markFundingInvalid(appId: string, appUserId: string, now: number): void {
    this.db
      .query("UPDATE connections SET funding_status = 'invalid', updated_at = ? WHERE app_id = ? AND app_user_id = ?")
      .run(now, appId, appUserId);
  }
}
