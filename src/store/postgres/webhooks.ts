import type { ReservedSQL, SQL } from "bun";
import {
  eventPayload,
  newEndpointId,
  newEventId,
  newWebhookSecret,
  type CreatedWebhookEndpoint,
  type ClaimBound,
  type DeliveryFailure,
  type DeliveryRecord,
  type DisableReason,
  type DueDelivery,
  type StoredEndpointSecret,
  type WebhookEndpoint,
  type WebhookEventDraft,
  type WebhookEventType,
  type WebhookRepository,
} from "../webhooks";
import { sealEndpointSecret, subscribed, toDelivery, toDueDelivery, toEndpoint, toStoredSecret, type EndpointRow } from "../webhook-rows";
import type { SecretBox } from "../../secrets/secret-box";
import type { PostgresDatabase } from "./database";
import { postgresKeyCheck } from "./settings";

type Rows = Array<Record<string, unknown>>;
// Rows come back with the same column names as SQLite's; int8 columns as strings, which the mappers convert.
const endpointOf = (r: Record<string, unknown>) => toEndpoint(r as unknown as EndpointRow);

/**
 * Records an event and its deliveries inside the caller's transaction `tx` (the connection
 * repository's, so the change and its event commit together).
 */
export async function recordWebhookEvent(tx: SQL | ReservedSQL, draft: WebhookEventDraft, now: number): Promise<string | null> {
  const rows: Rows = await tx`SELECT * FROM webhook_endpoints WHERE app_id = ${draft.appId} AND disabled_at IS NULL`;
  const targets = subscribed(rows.map(endpointOf), draft.type);
  if (targets.length === 0) return null;
  const id = newEventId();
  const inserted: Rows = await tx`INSERT INTO webhook_events (id, app_id, type, payload, dedup_key, created_at)
    VALUES (${id}, ${draft.appId}, ${draft.type}, ${eventPayload(draft, now)}, ${draft.dedupKey ?? null}, ${now})
    ON CONFLICT (dedup_key) DO NOTHING RETURNING id`;
  if (inserted.length === 0) return null;
  for (const endpoint of targets) {
    await tx`INSERT INTO webhook_deliveries (event_id, endpoint_id, app_id, state, next_attempt_at, created_at)
      VALUES (${id}, ${endpoint.id}, ${draft.appId}, 'pending', ${now}, ${now})`;
  }
  return id;
}

export class PostgresWebhookRepository implements WebhookRepository {
  constructor(
    private readonly db: PostgresDatabase,
    private readonly secrets: SecretBox,
  ) {}

  async createEndpoint(appId: string, url: string, eventTypes: WebhookEventType[] | null, now: number): Promise<CreatedWebhookEndpoint> {
    const types = eventTypes === null ? null : JSON.stringify(eventTypes);
    const id = newEndpointId();
    const secret = newWebhookSecret();
    const row: Record<string, unknown> = await this.db.run((sql) =>
      sql.begin(async (tx) => {
        const sealed = sealEndpointSecret(this.secrets, await postgresKeyCheck(tx), id, secret);
        const [inserted] = await tx`INSERT INTO webhook_endpoints (id, app_id, url, secret, event_types, created_at)
          VALUES (${id}, ${appId}, ${url}, ${sealed}, ${types}, ${now}) RETURNING *`;
        return inserted;
      }),
    );
    return { ...endpointOf(row), secret };
  }

  async listEndpoints(appId: string): Promise<WebhookEndpoint[]> {
    const rows: Rows = await this.db.run((sql) => sql`SELECT * FROM webhook_endpoints WHERE app_id = ${appId} ORDER BY created_at, id`);
    return rows.map(endpointOf);
  }

  async deleteEndpoint(appId: string, endpointId: string): Promise<boolean> {
    const rows: Rows = await this.db.run((sql) => sql`DELETE FROM webhook_endpoints WHERE app_id = ${appId} AND id = ${endpointId} RETURNING id`);
    return rows.length > 0;
  }

  async disableEndpoint(endpointId: string, reason: DisableReason, now: number): Promise<void> {
    await this.db.run((sql) =>
      sql.begin(async (tx) => {
        await tx`UPDATE webhook_endpoints SET disabled_at = ${now}, disabled_reason = ${reason} WHERE id = ${endpointId} AND disabled_at IS NULL`;
        await tx`UPDATE webhook_deliveries SET state = 'failed', finished_at = ${now}, last_error = ${`endpoint disabled (${reason})`}
          WHERE endpoint_id = ${endpointId} AND state = 'pending'`;
      }),
    );
  }

  async enableEndpoint(appId: string, endpointId: string): Promise<WebhookEndpoint | null> {
    const [row] = await this.db.run(
      (sql) => sql`UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL WHERE app_id = ${appId} AND id = ${endpointId} RETURNING *`,
    );
    return row ? endpointOf(row) : null;
  }

  async record(draft: WebhookEventDraft, now: number): Promise<string | null> {
    return this.db.run((sql) => sql.begin((tx) => recordWebhookEvent(tx, draft, now)));
  }

  /**
   * SKIP LOCKED: instances polling together each take different deliveries, none waits. Each
   * endpoint's share is picked (and locked) by its own subquery, an index seek however long
   * its backlog, so an instance skips the rows another has just locked and takes that
   * endpoint's next ones instead (the bound is per instance). The due condition sits on the
   * locked rows: a row another instance leased after this statement's snapshot is re-read
   * when locked, and then is no longer due.
   */
  async claimDue(now: number, limit: number, leaseMs: number, bound?: ClaimBound): Promise<DueDelivery[]> {
    const perEndpoint = bound?.perEndpoint ?? limit;
    const sending = JSON.stringify(Object.fromEntries(bound?.sending ?? []));
    const rows: Rows = await this.db.run(
      (sql) => sql`WITH sending AS (SELECT key AS endpoint_id, value::int AS count FROM jsonb_each_text(${sending}::text::jsonb)),
        endpoints AS (
          SELECT p.id AS endpoint_id, ${perEndpoint} - COALESCE(s.count, 0) AS room
          FROM webhook_endpoints p LEFT JOIN sending s ON s.endpoint_id = p.id
          WHERE p.disabled_at IS NULL AND COALESCE(s.count, 0) < ${perEndpoint}),
        picked AS (
          SELECT x.* FROM endpoints p CROSS JOIN LATERAL (
            SELECT d.event_id, d.endpoint_id, d.next_attempt_at FROM webhook_deliveries d
            WHERE d.endpoint_id = p.endpoint_id AND d.state = 'pending' AND d.next_attempt_at <= ${now}
            ORDER BY d.next_attempt_at, d.created_at, d.event_id LIMIT p.room FOR UPDATE SKIP LOCKED) x),
        due AS (
          SELECT event_id, endpoint_id FROM (
            SELECT *, row_number() OVER (PARTITION BY endpoint_id ORDER BY next_attempt_at, event_id) AS turn FROM picked) r
          ORDER BY turn, next_attempt_at LIMIT ${limit})
        UPDATE webhook_deliveries d SET next_attempt_at = ${now + leaseMs}
        FROM due, webhook_events e, webhook_endpoints p
        WHERE d.event_id = due.event_id AND d.endpoint_id = due.endpoint_id AND e.id = d.event_id AND p.id = d.endpoint_id
        RETURNING d.event_id, d.endpoint_id, d.attempts, e.payload, p.url, p.secret`,
    );
    // A secret that does not open (another key) comes as null: the dispatcher fails that delivery alone.
    return rows.map((d) => toDueDelivery(d, this.secrets));
  }

  async markDelivered(eventId: string, endpointId: string, status: number, now: number): Promise<void> {
    await this.db.run(
      (sql) => sql`UPDATE webhook_deliveries SET state = 'delivered', attempts = attempts + 1, last_status = ${status}, last_error = NULL, finished_at = ${now}
        WHERE event_id = ${eventId} AND endpoint_id = ${endpointId} AND state = 'pending'`,
    );
  }

  async markAttemptFailed(
    eventId: string,
    endpointId: string,
    attempts: number,
    nextAttemptAt: number | null,
    status: number | null,
    error: DeliveryFailure,
    now: number,
  ): Promise<void> {
    const state = nextAttemptAt === null ? "failed" : "pending";
    const finishedAt = nextAttemptAt === null ? now : null;
    await this.db.run(
      (sql) => sql`UPDATE webhook_deliveries SET attempts = ${attempts}, last_status = ${status}, last_error = ${error.slice(0, 500)},
          state = ${state}, next_attempt_at = ${nextAttemptAt}, finished_at = ${finishedAt}
        WHERE event_id = ${eventId} AND endpoint_id = ${endpointId} AND state = 'pending'`,
    );
  }

  async listDeliveries(appId: string, limit: number, endpointId?: string): Promise<DeliveryRecord[]> {
    const endpoint = endpointId ?? null;
    const rows: Rows = await this.db.run(
      (sql) => sql`SELECT d.*, e.type FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
        WHERE d.app_id = ${appId} AND (${endpoint}::text IS NULL OR d.endpoint_id = ${endpoint})
        ORDER BY d.created_at DESC, d.event_id DESC LIMIT ${limit}`,
    );
    return rows.map(toDelivery);
  }

  async storedSecrets(): Promise<StoredEndpointSecret[]> {
    const rows: Rows = await this.db.run((sql) => sql`SELECT id, app_id, secret FROM webhook_endpoints ORDER BY id`);
    return rows.map(toStoredSecret);
  }

  async replaceStoredSecret(endpointId: string, expected: string, replacement: string): Promise<boolean> {
    const rows: Rows = await this.db.run(
      (sql) => sql`UPDATE webhook_endpoints SET secret = ${replacement} WHERE id = ${endpointId} AND secret = ${expected} RETURNING id`,
    );
    return rows.length === 1;
  }

  async purgeFinished(before: number, limit: number): Promise<number> {
    const rows: Rows = await this.db.run(
      (sql) => sql`DELETE FROM webhook_events WHERE id IN (
          SELECT e.id FROM webhook_events e WHERE e.created_at < ${before}
            AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND (d.state = 'pending' OR d.finished_at >= ${before}))
          LIMIT ${limit}) RETURNING id`,
    );
    return rows.length;
  }
}
