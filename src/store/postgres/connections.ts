import type { Connection, ConnectionRepository, FundingChoice, FundingSource, FundingStatus, StoredUserKey } from "../connections";
import { num, numOrNull, type PostgresDatabase } from "./database";
import { approvalEvent, fundingInvalidEvent, revokedEvent } from "../connection-events";
import { fundingAfterApproval, fundingFields, type FundingBefore } from "../connection-funding";
import { recordWebhookEvent } from "./webhooks";
import { sealedContext, type SecretBox } from "../../secrets/secret-box";
import { postgresKeyCheck } from "./settings";

type Row = Record<string, unknown>;

const toConnection = (r: Row): Connection => ({
  appId: String(r.app_id),
  appUserId: String(r.app_user_id),
  monthlyCapNano: num(r.monthly_cap_nano),
  ...fundingFields({
    source: r.funding_source as FundingSource,
    fingerprint: r.user_key_fingerprint === null ? null : String(r.user_key_fingerprint),
    linkedAt: numOrNull(r.user_key_linked_at),
    status: r.funding_status as FundingStatus,
  }),
  connectedAt: num(r.connected_at),
  updatedAt: num(r.updated_at),
  revokedAt: numOrNull(r.revoked_at),
});

const fundingBefore = (r: Row): FundingBefore => ({
  source: r.funding_source as FundingSource,
  sealedKey: r.user_key_sealed === null ? null : String(r.user_key_sealed),
  fingerprint: r.user_key_fingerprint === null ? null : String(r.user_key_fingerprint),
  linkedAt: numOrNull(r.user_key_linked_at),
  status: r.funding_status as FundingStatus,
  revoked: r.revoked_at !== null,
});

export class PostgresConnectionRepository implements ConnectionRepository {
  constructor(
    private readonly db: PostgresDatabase,
    private readonly secrets: SecretBox,
  ) {}

  async find(appId: string, appUserId: string): Promise<Connection | null> {
    const [row] = await this.db.run((sql) => sql`SELECT * FROM connections WHERE app_id = ${appId} AND app_user_id = ${appUserId}`);
    return row ? toConnection(row) : null;
  }

  async findActive(appId: string, appUserId: string): Promise<Connection | null> {
    const c = await this.find(appId, appUserId);
    return c && c.revokedAt === null ? c : null;
  }

  async approve(appId: string, appUserId: string, monthlyCapNano: number, now: number, funding?: FundingChoice): Promise<Connection> {
    // The change and the webhook event it causes commit together (ARCHITECTURE.md §6);
    // the row lock taken by FOR UPDATE makes "before" the state this change replaced.
    return this.db.run((sql) =>
      sql.begin(async (tx) => {
        const [prior] = await tx`SELECT * FROM connections WHERE app_id = ${appId} AND app_user_id = ${appUserId} FOR UPDATE`;
        // Only a new user key is sealed, behind the key fence (src/store/key-fence.ts).
        const storedCheck = funding?.source === "user" ? await postgresKeyCheck(tx) : null;
        const f = fundingAfterApproval(prior ? fundingBefore(prior) : null, funding, this.secrets, () => storedCheck, appId, appUserId, now);
        const [row] = await tx`INSERT INTO connections (app_id, app_user_id, monthly_cap_nano, funding_status, funding_source, user_key_sealed,
            user_key_fingerprint, user_key_linked_at, connected_at, updated_at)
          VALUES (${appId}, ${appUserId}, ${monthlyCapNano}, ${f.status}, ${f.source}, ${f.sealedKey}, ${f.fingerprint}, ${f.linkedAt}, ${now}, ${now})
          ON CONFLICT (app_id, app_user_id) DO UPDATE SET
            monthly_cap_nano = EXCLUDED.monthly_cap_nano,
            funding_status = EXCLUDED.funding_status,
            funding_source = EXCLUDED.funding_source,
            user_key_sealed = EXCLUDED.user_key_sealed,
            user_key_fingerprint = EXCLUDED.user_key_fingerprint,
            user_key_linked_at = EXCLUDED.user_key_linked_at,
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
    const rows: Row[] = await this.db.run(
      (sql) => sql`SELECT * FROM connections WHERE app_id = ${appId} AND app_user_id COLLATE "C" > ${afterUserId}
        ORDER BY app_user_id COLLATE "C" LIMIT ${limit}`,
    );
    return rows.map(toConnection);
  }

  async revoke(appId: string, appUserId: string, now: number): Promise<void> {
    // The user's key goes with the connection (PostgreSQL keeps the old row version until vacuumed: README, Secrets at rest).
    await this.db.run((sql) =>
      sql.begin(async (tx) => {
        const revoked = await tx`UPDATE connections SET revoked_at = ${now}, updated_at = ${now}, funding_source = 'app',
            user_key_sealed = NULL, user_key_fingerprint = NULL, user_key_linked_at = NULL
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

  async userUpstreamKey(appId: string, appUserId: string): Promise<string | null> {
    const [row] = await this.db.run(
      (sql) => sql`SELECT user_key_sealed FROM connections WHERE app_id = ${appId} AND app_user_id = ${appUserId} AND revoked_at IS NULL
        AND funding_source = 'user' AND user_key_sealed IS NOT NULL`,
    );
    return row ? this.secrets.open(String(row.user_key_sealed), sealedContext.connectionUserKey(appId, appUserId)) : null;
  }

  async storedUserKeys(): Promise<StoredUserKey[]> {
    const rows: Row[] = await this.db.run(
      (sql) => sql`SELECT app_id, app_user_id, user_key_sealed FROM connections WHERE user_key_sealed IS NOT NULL ORDER BY app_id, app_user_id`,
    );
    return rows.map((r) => ({ appId: String(r.app_id), appUserId: String(r.app_user_id), stored: String(r.user_key_sealed) }));
  }

  async replaceStoredUserKey(appId: string, appUserId: string, expected: string, replacement: string): Promise<boolean> {
    const rows = await this.db.run(
      (sql) => sql`UPDATE connections SET user_key_sealed = ${replacement}
        WHERE app_id = ${appId} AND app_user_id = ${appUserId} AND user_key_sealed = ${expected} RETURNING app_id`,
    );
    return rows.length === 1;
  }

  async forgetUserKey(appId: string, appUserId: string, expected: string, now: number): Promise<boolean> {
    return this.db.run((sql) =>
      sql.begin(async (tx) => {
        const [prior] = await tx`SELECT funding_status, revoked_at FROM connections WHERE app_id = ${appId} AND app_user_id = ${appUserId} FOR UPDATE`;
        const cleared = await tx`UPDATE connections SET user_key_sealed = NULL, user_key_fingerprint = NULL, user_key_linked_at = NULL,
            funding_status = 'invalid', updated_at = ${now}
          WHERE app_id = ${appId} AND app_user_id = ${appUserId} AND user_key_sealed = ${expected} RETURNING app_id`;
        if (cleared.length === 0) return false;
        if (prior?.funding_status === "ok" && prior.revoked_at === null) await recordWebhookEvent(tx, fundingInvalidEvent(appId, appUserId), now);
        return true;
      }),
    );
  }
}
