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

/**
 * Idempotency keys of chat calls, per app. A claim is atomic in the shared store, so two
 * processes behind one load balancer cannot both run a key.
 */
export interface IdempotencyKeyRepository {
  claim(appId: string, key: string, fingerprint: Uint8Array, requestId: string, now: number, leaseMs: number, ttlMs: number): Promise<ClaimOutcome>;
  /** Extends a running claim's lease; false if the claim is no longer this request's. */
  renew(appId: string, key: string, requestId: string, leaseUntil: number): Promise<boolean>;
  complete(appId: string, key: string, requestId: string, answer: StoredAnswer, expiresAt: number): Promise<void>;
  /** Frees the key after a call that charged nothing final (refused or failed), so a retry runs. */
  release(appId: string, key: string, requestId: string): Promise<void>;
  /** Deletes up to `limit` expired keys; returns how many. */
  purgeExpired(now: number, limit: number): Promise<number>;
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}
