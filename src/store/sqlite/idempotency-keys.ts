import type { Database } from "bun:sqlite";
import { sameBytes, type ClaimOutcome, type IdempotencyKeyRepository, type StoredAnswer } from "../idempotency-keys";

interface KeyRow {
  fingerprint: Uint8Array;
  request_id: string;
  state: "running" | "done";
  lease_until: number;
  expires_at: number;
  status: number | null;
  content_type: string | null;
  generation_id: string | null;
  body: Uint8Array | null;
}

/** A claim is one IMMEDIATE transaction on the shared SQLite file. */
export class SqliteIdempotencyKeyRepository implements IdempotencyKeyRepository {
  constructor(private readonly db: Database) {}

  async claim(appId: string, key: string, fingerprint: Uint8Array, requestId: string, now: number, leaseMs: number, ttlMs: number): Promise<ClaimOutcome> {
    return this.db
      .transaction((): ClaimOutcome => {
        const row = this.db
          .query<KeyRow, [string, string]>(
            `SELECT fingerprint, request_id, state, lease_until, expires_at, status, content_type, generation_id, body
             FROM idempotency_keys WHERE app_id = ? AND idem_key = ?`,
          )
          .get(appId, key);
        if (row && row.expires_at > now) {
          if (!sameBytes(row.fingerprint, fingerprint)) return { kind: "mismatch" };
          if (row.state === "done") {
            return {
              kind: "done",
              requestId: row.request_id,
              answer: { status: row.status ?? 200, contentType: row.content_type ?? "application/json", generationId: row.generation_id, body: row.body },
            };
          }
          // A running claim whose lease lapsed belonged to a process that died: take it over.
          if (row.lease_until > now) return { kind: "running", requestId: row.request_id };
        }
        this.db
          .query(
            `INSERT OR REPLACE INTO idempotency_keys (app_id, idem_key, fingerprint, request_id, state, lease_until, expires_at)
             VALUES (?, ?, ?, ?, 'running', ?, ?)`,
          )
          .run(appId, key, fingerprint, requestId, now + leaseMs, now + ttlMs);
        return { kind: "claimed" };
      })
      .immediate();
  }

  async renew(appId: string, key: string, requestId: string, leaseUntil: number): Promise<boolean> {
    const result = this.db
      .query(`UPDATE idempotency_keys SET lease_until = ? WHERE app_id = ? AND idem_key = ? AND request_id = ? AND state = 'running'`)
      .run(leaseUntil, appId, key, requestId);
    return result.changes > 0;
  }

  async complete(appId: string, key: string, requestId: string, answer: StoredAnswer, expiresAt: number): Promise<void> {
    this.db
      .query(
        `UPDATE idempotency_keys SET state = 'done', status = ?, content_type = ?, generation_id = ?, body = ?, expires_at = ?
         WHERE app_id = ? AND idem_key = ? AND request_id = ?`,
      )
      .run(answer.status, answer.contentType, answer.generationId, answer.body, expiresAt, appId, key, requestId);
  }

  async release(appId: string, key: string, requestId: string): Promise<void> {
    this.db.query(`DELETE FROM idempotency_keys WHERE app_id = ? AND idem_key = ? AND request_id = ?`).run(appId, key, requestId);
  }

  async purgeExpired(now: number, limit: number): Promise<number> {
    return this.db.query(`DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE expires_at <= ? LIMIT ?)`).run(now, limit)
      .changes;
  }
}
