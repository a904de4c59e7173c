import { sameBytes, type ClaimOutcome, type IdempotencyKeyRepository, type StoredAnswer } from "../idempotency-keys";
import { bytes, num, type PostgresDatabase } from "./database";

/**
 * A claim locks the key's row (or, for a new key, relies on the primary key: of two
 * concurrent inserts one waits for the other and then sees its row), so two instances
 * cannot both run a key.
 */
export class PostgresIdempotencyKeyRepository implements IdempotencyKeyRepository {
  constructor(private readonly db: PostgresDatabase) {}

  claim(appId: string, key: string, fingerprint: Uint8Array, requestId: string, now: number, leaseMs: number, ttlMs: number): Promise<ClaimOutcome> {
    const print = Buffer.from(fingerprint);
    return this.db.run((sql) =>
      sql.begin(async (tx): Promise<ClaimOutcome> => {
        // Inserted when new; otherwise the existing row is locked and read.
        const [created] = await tx`INSERT INTO idempotency_keys (app_id, idem_key, fingerprint, request_id, state, lease_until, expires_at)
          VALUES (${appId}, ${key}, ${print}, ${requestId}, 'running', ${now + leaseMs}, ${now + ttlMs})
          ON CONFLICT (app_id, idem_key) DO NOTHING RETURNING request_id`;
        if (created) return { kind: "claimed" };
        const [row] = await tx`SELECT * FROM idempotency_keys WHERE app_id = ${appId} AND idem_key = ${key} FOR UPDATE`;
        if (row && num(row.expires_at) > now) {
          if (!sameBytes(bytes(row.fingerprint), fingerprint)) return { kind: "mismatch" };
          if (row.state === "done") {
            return {
              kind: "done",
              requestId: String(row.request_id),
              answer: {
                status: row.status === null ? 200 : num(row.status),
                contentType: (row.content_type as string | null) ?? "application/json",
                generationId: (row.generation_id as string | null) ?? null,
                body: row.body === null ? null : bytes(row.body),
              },
            };
          }
          // A running claim whose lease lapsed belonged to an instance that died: take it over.
          if (num(row.lease_until) > now) return { kind: "running", requestId: String(row.request_id) };
        }
        await tx`INSERT INTO idempotency_keys (app_id, idem_key, fingerprint, request_id, state, lease_until, expires_at)
          VALUES (${appId}, ${key}, ${print}, ${requestId}, 'running', ${now + leaseMs}, ${now + ttlMs})
          ON CONFLICT (app_id, idem_key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, request_id = EXCLUDED.request_id,
            state = 'running', lease_until = EXCLUDED.lease_until, expires_at = EXCLUDED.expires_at,
            status = NULL, content_type = NULL, generation_id = NULL, body = NULL`;
        return { kind: "claimed" };
      }),
    );
  }

  async renew(appId: string, key: string, requestId: string, leaseUntil: number): Promise<boolean> {
    const rows = await this.db.run(
      (sql) => sql`UPDATE idempotency_keys SET lease_until = ${leaseUntil}
        WHERE app_id = ${appId} AND idem_key = ${key} AND request_id = ${requestId} AND state = 'running' RETURNING 1`,
    );
    return rows.length > 0;
  }

  async complete(appId: string, key: string, requestId: string, answer: StoredAnswer, expiresAt: number): Promise<void> {
    const body = answer.body === null ? null : Buffer.from(answer.body);
    await this.db.run(
      (sql) => sql`UPDATE idempotency_keys SET state = 'done', status = ${answer.status}, content_type = ${answer.contentType},
          generation_id = ${answer.generationId}, body = ${body}, expires_at = ${expiresAt}
        WHERE app_id = ${appId} AND idem_key = ${key} AND request_id = ${requestId}`,
    );
  }

  async release(appId: string, key: string, requestId: string): Promise<void> {
    await this.db.run((sql) => sql`DELETE FROM idempotency_keys WHERE app_id = ${appId} AND idem_key = ${key} AND request_id = ${requestId}`);
  }

  async purgeExpired(now: number, limit: number): Promise<number> {
    const rows = await this.db.run(
      (sql) => sql`DELETE FROM idempotency_keys WHERE ctid IN (SELECT ctid FROM idempotency_keys WHERE expires_at <= ${now} LIMIT ${limit}) RETURNING 1`,
    );
    return rows.length;
  }
}
