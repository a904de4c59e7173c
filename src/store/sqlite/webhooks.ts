import type { Database } from "bun:sqlite";
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
import { sealEndpointSecret, subscribed, toEndpoint, toDelivery, toDueDelivery, toStoredSecret, type EndpointRow } from "../webhook-rows";
import type { SecretBox } from "../../secrets/secret-box";
import { scrubbingWrite } from "./database";
import { sqliteKeyCheck } from "./settings";

/**
 * Records an event and its deliveries on `db`, inside the caller's transaction: the
 * connection repository calls it in the transaction that makes the change it reports.
 */
export function recordWebhookEvent(db: Database, draft: WebhookEventDraft, now: number): string | null {
  const endpoints = db
    .query<EndpointRow, [string]>("SELECT * FROM webhook_endpoints WHERE app_id = ? AND disabled_at IS NULL")
    .all(draft.appId)
    .map(toEndpoint);
  const targets = subscribed(endpoints, draft.type);
  if (targets.length === 0) return null;
  const id = newEventId();
  const inserted = db
    .query("INSERT INTO webhook_events (id, app_id, type, payload, dedup_key, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (dedup_key) DO NOTHING")
    .run(id, draft.appId, draft.type, eventPayload(draft, now), draft.dedupKey ?? null, now);
  if (inserted.changes === 0) return null;
  const delivery = db.query(
    "INSERT INTO webhook_deliveries (event_id, endpoint_id, app_id, state, next_attempt_at, created_at) VALUES (?, ?, ?, 'pending', ?, ?)",
  );
  for (const endpoint of targets) delivery.run(id, endpoint.id, draft.appId, now, now);
  return id;
}

export class SqliteWebhookRepository implements WebhookRepository {
  constructor(
    private readonly db: Database,
    private readonly secrets: SecretBox,
  ) {}

  async createEndpoint(appId: string, url: string, eventTypes: WebhookEventType[] | null, now: number): Promise<CreatedWebhookEndpoint> {
    const id = newEndpointId();
    const secret = newWebhookSecret();
    // IMMEDIATE: the key check read and the insert commit together (src/store/key-fence.ts).
    this.db
      .transaction(() => {
        const sealed = sealEndpointSecret(this.secrets, sqliteKeyCheck(this.db), id, secret);
        this.db
          .query("INSERT INTO webhook_endpoints (id, app_id, url, secret, event_types, created_at) VALUES (?, ?, ?, ?, ?, ?)")
          .run(id, appId, url, sealed, eventTypes === null ? null : JSON.stringify(eventTypes), now);
      })
      .immediate();
    return { ...this.endpoint(id)!, secret };
  }

  async listEndpoints(appId: string): Promise<WebhookEndpoint[]> {
    return this.db.query<EndpointRow, [string]>("SELECT * FROM webhook_endpoints WHERE app_id = ? ORDER BY created_at, id").all(appId).map(toEndpoint);
  }

  async deleteEndpoint(appId: string, endpointId: string): Promise<boolean> {
    return this.db.query("DELETE FROM webhook_endpoints WHERE app_id = ? AND id = ?").run(appId, endpointId).changes > 0;
  }

  async disableEndpoint(endpointId: string, reason: DisableReason, now: number): Promise<void> {
    this.db.transaction(() => {
      this.db.query("UPDATE webhook_endpoints SET disabled_at = ?, disabled_reason = ? WHERE id = ? AND disabled_at IS NULL").run(now, reason, endpointId);
      this.db
        .query("UPDATE webhook_deliveries SET state = 'failed', finished_at = ?, last_error = ? WHERE endpoint_id = ? AND state = 'pending'")
        .run(now, `endpoint disabled (${reason})`, endpointId);
    })();
  }

  async enableEndpoint(appId: string, endpointId: string): Promise<WebhookEndpoint | null> {
    this.db.query("UPDATE webhook_endpoints SET disabled_at = NULL, disabled_reason = NULL WHERE app_id = ? AND id = ?").run(appId, endpointId);
    const endpoint = this.endpoint(endpointId);
    return endpoint && endpoint.appId === appId ? endpoint : null;
  }

  async record(draft: WebhookEventDraft, now: number): Promise<string | null> {
    // IMMEDIATE, as every read-then-write here: another process on the file cannot commit in between.
    return this.db.transaction(() => recordWebhookEvent(this.db, draft, now)).immediate();
  }

  async claimDue(now: number, limit: number, leaseMs: number, bound?: ClaimBound): Promise<DueDelivery[]> {
    const perEndpoint = bound?.perEndpoint ?? limit;
    const sending = JSON.stringify(Object.fromEntries(bound?.sending ?? []));
    const claimed = this.db
      .transaction(() => {
        // Per endpoint with room, its earliest due deliveries (an index seek each, however long
        // its backlog); then turns across endpoints. Ties go in the order they were recorded.
        // CROSS JOIN keeps the join order: left to itself, SQLite may scan every event instead.
        const due = this.db
          .query<Record<string, unknown>, [number, number, string, number]>(
            `WITH sending AS (SELECT key AS endpoint_id, value AS count FROM json_each(?3)),
             open AS (
               SELECT p.id, ?4 - COALESCE(s.count, 0) AS room FROM webhook_endpoints p LEFT JOIN sending s ON s.endpoint_id = p.id
               WHERE p.disabled_at IS NULL AND COALESCE(s.count, 0) < ?4),
             picked AS (
               SELECT d.rowid AS position, d.event_id, d.endpoint_id, d.attempts, d.next_attempt_at, o.room
               FROM open o JOIN webhook_deliveries d ON d.rowid IN (
                 SELECT x.rowid FROM webhook_deliveries x WHERE x.endpoint_id = o.id AND x.state = 'pending' AND x.next_attempt_at <= ?1
                 ORDER BY x.next_attempt_at, x.rowid LIMIT ?4)),
             ranked AS (SELECT *, ROW_NUMBER() OVER (PARTITION BY endpoint_id ORDER BY next_attempt_at, position) AS turn FROM picked)
           SELECT r.event_id, r.endpoint_id, r.attempts, e.payload, p.url, p.secret
           FROM ranked r CROSS JOIN webhook_events e ON e.id = r.event_id CROSS JOIN webhook_endpoints p ON p.id = r.endpoint_id
           WHERE r.turn <= r.room
           ORDER BY r.turn, r.next_attempt_at, r.position LIMIT ?2`,
          )
          .all(now, limit, sending, perEndpoint);
        const lease = this.db.query("UPDATE webhook_deliveries SET next_attempt_at = ? WHERE event_id = ? AND endpoint_id = ?");
        for (const d of due) lease.run(now + leaseMs, String(d.event_id), String(d.endpoint_id));
        return due;
      })
      .immediate();
    // Opened once the leases are committed: a secret that does not open (another key) comes
    // as null, and the dispatcher fails that delivery alone.
    return claimed.map((d) => toDueDelivery(d, this.secrets));
  }

  async markDelivered(eventId: string, endpointId: string, status: number, now: number): Promise<void> {
    this.db
      .query(
        "UPDATE webhook_deliveries SET state = 'delivered', attempts = attempts + 1, last_status = ?, last_error = NULL, finished_at = ? WHERE event_id = ? AND endpoint_id = ? AND state = 'pending'",
      )
      .run(status, now, eventId, endpointId);
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
    this.db
      .query(
        `UPDATE webhook_deliveries SET attempts = ?, last_status = ?, last_error = ?,
           state = CASE WHEN ? IS NULL THEN 'failed' ELSE 'pending' END,
           next_attempt_at = ?, finished_at = CASE WHEN ? IS NULL THEN ? ELSE NULL END
         WHERE event_id = ? AND endpoint_id = ? AND state = 'pending'`,
      )
      .run(attempts, status, error.slice(0, 500), nextAttemptAt, nextAttemptAt, nextAttemptAt, now, eventId, endpointId);
  }

  async listDeliveries(appId: string, limit: number, endpointId?: string): Promise<DeliveryRecord[]> {
    return this.db
      .query<Record<string, unknown>, [string, string | null, string | null, number]>(
        `SELECT d.*, e.type FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
         WHERE d.app_id = ? AND (? IS NULL OR d.endpoint_id = ?) ORDER BY d.created_at DESC, d.event_id DESC LIMIT ?`,
      )
      .all(appId, endpointId ?? null, endpointId ?? null, limit)
      .map(toDelivery);
  }

  async purgeFinished(before: number, limit: number): Promise<number> {
    return this.db
      .query(
        `DELETE FROM webhook_events WHERE id IN (
           SELECT e.id FROM webhook_events e WHERE e.created_at < ?1
             AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND (d.state = 'pending' OR d.finished_at >= ?1))
           LIMIT ?2)`,
      )
      .run(before, limit).changes;
  }

  async storedSecrets(): Promise<StoredEndpointSecret[]> {
    return this.db.query<Record<string, unknown>, []>("SELECT id, app_id, secret FROM webhook_endpoints ORDER BY id").all().map(toStoredSecret);
  }

  /** The secret replaced does not stay in the file (scrubbingWrite): it may be in clear. */
  async replaceStoredSecret(endpointId: string, expected: string, replacement: string): Promise<boolean> {
    const update = this.db.query("UPDATE webhook_endpoints SET secret = ? WHERE id = ? AND secret = ?");
    return scrubbingWrite(this.db, () => update.run(replacement, endpointId, expected).changes === 1);
  }

  private endpoint(id: string): WebhookEndpoint | null {
    const row = this.db.query<EndpointRow, [string]>("SELECT * FROM webhook_endpoints WHERE id = ?").get(id);
    return row ? toEndpoint(row) : null;
  }
}
