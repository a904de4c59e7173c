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

/** A user's approval of a monthly cap for one app. Every query is scoped by app id. */
export interface ConnectionRepository {
  /** The connection row, active or revoked; null if the user never connected. */
  find(appId: string, appUserId: string): Promise<Connection | null>;
  /** The connection if it is active (not revoked). */
  findActive(appId: string, appUserId: string): Promise<Connection | null>;
  /**
   * Approves or updates: sets the cap, clears a funding_invalid state and un-revokes.
   * A fresh approval after a revoke counts as a new connection (connectedAt moves).
   */
  approve(appId: string, appUserId: string, monthlyCapNano: number, now: number): Promise<Connection>;
  /** An app's connections (active and revoked), by user id, a page after `afterUserId`. */
  listForApp(appId: string, limit: number, afterUserId?: string): Promise<Connection[]>;
  /** Revokes; revoking an absent or already revoked connection is a no-op. */
  revoke(appId: string, appUserId: string, now: number): Promise<void>;
  /** Marks the connection's funding invalid (upstream said payment required). */
  markFundingInvalid(appId: string, appUserId: string, now: number): Promise<void>;
}
