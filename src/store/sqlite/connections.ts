import type { Database } from "bun:sqlite";
import type { Connection, ConnectionRepository, FundingChoice, FundingSource, FundingStatus, StoredUserKey } from "../connections";
import { approvalEvent, fundingInvalidEvent, revokedEvent } from "../connection-events";
import { fundingAfterApproval, fundingFields, type FundingBefore } from "../connection-funding";
import { recordWebhookEvent } from "./webhooks";
import { scrubbingWrite } from "./database";
import { sealedContext, type SecretBox } from "../../secrets/secret-box";
import { sqliteKeyCheck } from "./settings";

interface ConnectionRow {
  app_id: string;
  app_user_id: string;
  monthly_cap_nano: number;
  funding_status: FundingStatus;
  funding_source: FundingSource;
  user_key_fingerprint: string | null;
  user_key_linked_at: number | null;
  connected_at: number;
  updated_at: number;
  revoked_at: number | null;
}

/** Every column but the sealed key, which only userUpstreamKey and the secrets' upkeep read. */
const COLUMNS = `app_id, app_user_id, monthly_cap_nano, funding_status, funding_source, user_key_fingerprint, user_key_linked_at,
  connected_at, updated_at, revoked_at`;

const toConnection = (r: ConnectionRow): Connection => ({
  appId: r.app_id,
  appUserId: r.app_user_id,
  monthlyCapNano: r.monthly_cap_nano,
  ...fundingFields({ source: r.funding_source, fingerprint: r.user_key_fingerprint, linkedAt: r.user_key_linked_at, status: r.funding_status }),
  connectedAt: r.connected_at,
  updatedAt: r.updated_at,
  revokedAt: r.revoked_at,
});

const KEY_CLEARED = "user_key_sealed = NULL, user_key_fingerprint = NULL, user_key_linked_at = NULL";

export class SqliteConnectionRepository implements ConnectionRepository {
  private readonly findStmt;

  constructor(
    private readonly db: Database,
    private readonly secrets: SecretBox,
  ) {
    this.findStmt = db.query<ConnectionRow, [string, string]>(`SELECT ${COLUMNS} FROM connections WHERE app_id = ? AND app_user_id = ?`);
  }

  async find(appId: string, appUserId: string): Promise<Connection | null> {
    const row = this.findStmt.get(appId, appUserId);
    return row ? toConnection(row) : null;
  }

  async findActive(appId: string, appUserId: string): Promise<Connection | null> {
    const c = await this.find(appId, appUserId);
    return c && c.revokedAt === null ? c : null;
  }

  async approve(appId: string, appUserId: string, monthlyCapNano: number, now: number, funding?: FundingChoice): Promise<Connection> {
    // The change and the webhook event it causes commit together (ARCHITECTURE.md §6).
    // IMMEDIATE: it reads before it writes, and another process sharing the file (with
    // REDIS_URL) committing in between would otherwise fail it with SQLITE_BUSY.
    const approve = this.db.transaction(() => {
      const before = this.rowWithKey(appId, appUserId);
      const f = fundingAfterApproval(before && fundingBefore(before), funding, this.secrets, () => sqliteKeyCheck(this.db), appId, appUserId, now);
      this.db
        .query(
          `INSERT INTO connections (app_id, app_user_id, monthly_cap_nano, funding_status, funding_source, user_key_sealed,
             user_key_fingerprint, user_key_linked_at, connected_at, updated_at)
           VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)
           ON CONFLICT (app_id, app_user_id) DO UPDATE SET
             monthly_cap_nano = excluded.monthly_cap_nano,
             funding_status = excluded.funding_status,
             funding_source = excluded.funding_source,
             user_key_sealed = excluded.user_key_sealed,
             user_key_fingerprint = excluded.user_key_fingerprint,
             user_key_linked_at = excluded.user_key_linked_at,
             connected_at = CASE WHEN revoked_at IS NULL THEN connected_at ELSE excluded.connected_at END,
             updated_at = excluded.updated_at,
             revoked_at = NULL`,
        )
        .run(appId, appUserId, monthlyCapNano, f.status, f.source, f.sealedKey, f.fingerprint, f.linkedAt, now);
      const after = toConnection(this.findStmt.get(appId, appUserId)!);
      recordWebhookEvent(this.db, approvalEvent(before ? toConnection(before) : null, after), now);
      return after;
    });
    // A choice of funding may replace or drop a key: its old sealed bytes leave the file.
    return funding ? scrubbingWrite(this.db, () => approve.immediate()) : approve.immediate();
  }

  async listForApp(appId: string, limit: number, afterUserId = ""): Promise<Connection[]> {
    return this.db
      .query<ConnectionRow, [string, string, number]>(`SELECT ${COLUMNS} FROM connections WHERE app_id = ? AND app_user_id > ? ORDER BY app_user_id LIMIT ?`)
      .all(appId, afterUserId, limit)
      .map(toConnection);
  }

  async revoke(appId: string, appUserId: string, now: number): Promise<void> {
    const revoke = this.db.transaction(() => {
      const revoked = this.db
        .query(
          `UPDATE connections SET revoked_at = ?, updated_at = ?, funding_source = 'app', ${KEY_CLEARED}
           WHERE app_id = ? AND app_user_id = ? AND revoked_at IS NULL`,
        )
        .run(now, now, appId, appUserId);
      if (revoked.changes > 0) recordWebhookEvent(this.db, revokedEvent(appId, appUserId), now);
    });
    // The user's key is deleted with the connection; scrubbed, as every secret deletion is.
    if (this.rowWithKey(appId, appUserId)?.user_key_sealed) scrubbingWrite(this.db, () => revoke.immediate());
    else revoke.immediate();
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

  async userUpstreamKey(appId: string, appUserId: string): Promise<string | null> {
    const row = this.db
      .query<{ user_key_sealed: string }, [string, string]>(
        `SELECT user_key_sealed FROM connections WHERE app_id = ? AND app_user_id = ? AND revoked_at IS NULL
           AND funding_source = 'user' AND user_key_sealed IS NOT NULL`,
      )
      .get(appId, appUserId);
    return row ? this.secrets.open(row.user_key_sealed, sealedContext.connectionUserKey(appId, appUserId)) : null;
  }

  async storedUserKeys(): Promise<StoredUserKey[]> {
    return this.db
      .query<{ app_id: string; app_user_id: string; user_key_sealed: string }, []>(
        "SELECT app_id, app_user_id, user_key_sealed FROM connections WHERE user_key_sealed IS NOT NULL ORDER BY app_id, app_user_id",
      )
      .all()
      .map((r) => ({ appId: r.app_id, appUserId: r.app_user_id, stored: r.user_key_sealed }));
  }

  /** The key replaced does not stay in the file (scrubbingWrite): sealed under a key being retired. */
  async replaceStoredUserKey(appId: string, appUserId: string, expected: string, replacement: string): Promise<boolean> {
    const update = this.db.query("UPDATE connections SET user_key_sealed = ? WHERE app_id = ? AND app_user_id = ? AND user_key_sealed = ?");
    return scrubbingWrite(this.db, () => update.run(replacement, appId, appUserId, expected).changes === 1);
  }

  async forgetUserKey(appId: string, appUserId: string, expected: string, now: number): Promise<boolean> {
    const forget = this.db.transaction(() => {
      const before = this.findStmt.get(appId, appUserId);
      const cleared = this.db
        .query(
          `UPDATE connections SET ${KEY_CLEARED}, funding_status = 'invalid', updated_at = ?
           WHERE app_id = ? AND app_user_id = ? AND user_key_sealed = ?`,
        )
        .run(now, appId, appUserId, expected);
      if (cleared.changes === 0) return false;
      if (before?.funding_status === "ok" && before.revoked_at === null) recordWebhookEvent(this.db, fundingInvalidEvent(appId, appUserId), now);
      return true;
    });
    return scrubbingWrite(this.db, () => forget.immediate());
  }

  /** The row with its sealed key: what an approval or a revoke must know of the key it may replace. */
  private rowWithKey(appId: string, appUserId: string): RowWithKey | null {
    return this.db
      .query<RowWithKey, [string, string]>(`SELECT ${COLUMNS}, user_key_sealed FROM connections WHERE app_id = ? AND app_user_id = ?`)
      .get(appId, appUserId);
  }
}

type RowWithKey = ConnectionRow & { user_key_sealed: string | null };

const fundingBefore = (r: RowWithKey): FundingBefore => ({
  source: r.funding_source,
  sealedKey: r.user_key_sealed,
  fingerprint: r.user_key_fingerprint,
  linkedAt: r.user_key_linked_at,
  status: r.funding_status,
  revoked: r.revoked_at !== null,
});
