import type { Database } from "bun:sqlite";

/** The answer kept for a finished call, replayed to a retry with the same key. */
export interface StoredAnswer {
  status: number;
  contentType: string;
  generationId: string | null;
  /** Null when the answer was too large to keep: the call is done but cannot be replayed. */
  body: Uint8Array | null;
}

export type ClaimOutcome =
  /** This request owns the key now and runs. */
  | { kind: "claimed" }
  /** Another request with the key is still running (its lease holds). */
  | { kind: "running"; requestId: string }
  /** The key was used for a different request (other body or other user/grant). */
  | { kind: "mismatch" }
  /** The key's call finished; here is its answer. */
  | { kind: "done"; requestId: string; answer: StoredAnswer };

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

/**
 * Idempotency keys of chat calls, per app. A claim is one IMMEDIATE transaction on the
 * shared SQLite file, so two processes behind one load balancer cannot both run a key.
 */
export class IdempotencyKeyRepository {
  constructor(private readonly db: Database) {}

  claim(appId: string, key: string, fingerprint: Uint8Array, requestId: string, now: number, leaseMs: number, ttlMs: number): ClaimOutcome {
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

  /** Extends a running claim's lease; false if the claim is no longer this request's. */
  renew(appId: string, key: string, requestId: string, leaseUntil: number): boolean {
    const result = this.db
      .query(`UPDATE idempotency_keys SET lease_until = ? WHERE app_id = ? AND idem_key = ? AND request_id = ? AND state = 'running'`)
      .run(leaseUntil, appId, key, requestId);
    return result.changes > 0;
  }

  complete(appId: string, key: string, requestId: string, answer: StoredAnswer, expiresAt: number): void {
    this.db
      .query(
        `UPDATE idempotency_keys SET state = 'done', status = ?, content_type = ?, generation_id = ?, body = ?, expires_at = ?
         WHERE app_id = ? AND idem_key = ? AND request_id = ?`,
      )
      .run(answer.status, answer.contentType, answer.generationId, answer.body, expiresAt, appId, key, requestId);
  }

  /** Frees the key after a call that charged nothing final (refused or failed), so a retry runs. */
  release(appId: string, key: string, requestId: string): void {
    this.db.query(`DELETE FROM idempotency_keys WHERE app_id = ? AND idem_key = ? AND request_id = ?`).run(appId, key, requestId);
  }

  /** Deletes up to `limit` expired keys; returns how many. */
  purgeExpired(now: number, limit: number): number {
    return this.db
      .query(`DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE expires_at <= ? LIMIT ?)`)
      .run(now, limit).changes;
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}
