import { createHash } from "node:crypto";
import type { Clock } from "../clock";
import type { Config } from "../config";
import { ApiError } from "../errors";
import type { Logger } from "../logger";
import type { Payer } from "../request/payer";
import type { IdempotencyKeyRepository, StoredAnswer } from "../store/idempotency-keys";

/**
 * `Idempotency-Key` on chat calls (draft-ietf-httpapi-idempotency-key-header): a client
 * that retries after a network error, with the same key, gets the first call's answer
 * replayed instead of a second upstream call and a second charge.
 *
 * - The first request with a key claims it (one SQLite transaction, so across processes
 *   too) and runs; its answer is kept for IDEMPOTENCY_TTL_SECONDS.
 * - A retry while it runs gets 409 `idempotency_conflict` with Retry-After (the openai
 *   SDK retries 409 by itself); after it finished, the kept answer with
 *   `Idempotent-Replayed: true`, whatever the budget says now (it was paid for).
 * - The same key with another body or another user/grant gets 422 `idempotency_mismatch`.
 * - A call that ended without a final answer (refused, upstream failure) frees its key:
 *   nothing final was charged, and a retry should run.
 */

/** A running claim's lease. A process that dies stops renewing, and a retry takes over after it. */
const LEASE_MS = 60_000;
const RENEW_EVERY_MS = 20_000;
const PURGE_EVERY_CLAIMS = 64;
const PURGE_BATCH = 500;

/** What the chat service reports about a keyed call as it runs. */
export interface AnswerRecorder {
  /** A piece of the answer (a JSON body whole, a stream chunk by chunk), kept by reference. */
  chunk(bytes: Uint8Array): void;
  /**
   * The call finished and its final cost is charged: keep the answer for retries. Resolves
   * once it is kept (never rejects), so a JSON answer is only sent once a retry can find it.
   */
  finished(answer: { contentType: string; generationId: string | null }): Promise<void>;
  /** The call ended without an answer worth replaying: free the key so a retry runs. */
  abandoned(): void;
  /**
   * The client is answered (a timeout), but the call goes on and may be billed: the key stays
   * claimed, so a retry gets 409 instead of a second upstream call, until `finished` keeps
   * the answer that came late, or `failed` keeps the final error.
   */
  detach(): void;
  /** The detached call ended without an answer: keep this error as its answer, so a retry does not run it again. */
  failed(error: ApiError): void;
}

export class IdempotencyService {
  private claims = 0;

  constructor(
    private readonly keys: IdempotencyKeyRepository,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly config: Pick<Config, "idempotencyTtlSeconds" | "idempotencyMaxAnswerBytes">,
  ) {}

  /** Runs `call` under the request's Idempotency-Key, or replays/refuses; without a key, just runs it. */
  async run(
    appId: string,
    requestId: string,
    headers: Headers,
    payer: Payer,
    body: unknown,
    call: (recorder?: AnswerRecorder) => Promise<Response>,
  ): Promise<Response> {
    const key = readIdempotencyKey(headers);
    if (key === null) return call();
    const now = this.clock.now();
    const ttlMs = this.config.idempotencyTtlSeconds * 1000;
    if (++this.claims % PURGE_EVERY_CLAIMS === 0) {
      void this.keys.purgeExpired(now, PURGE_BATCH).catch((err) => this.logger.warn("purging expired idempotency keys failed", { error: String(err) }));
    }

    const outcome = await this.keys.claim(appId, key, fingerprintOf(payer, body), requestId, now, LEASE_MS, ttlMs);
    switch (outcome.kind) {
      case "mismatch":
        throw new ApiError("idempotency_mismatch", "this Idempotency-Key was already used for a different request (other body, user or grant)");
      case "running":
        throw new ApiError("idempotency_conflict", "a request with this Idempotency-Key is still running; retry shortly", {}, { "retry-after": "1" });
      case "done":
        this.logger.info("idempotent replay", { requestId, originalRequestId: outcome.requestId });
        return replay(outcome.answer);
    }
    // Answers above the limit are not kept; a retry learns the call is done but cannot be replayed.
    const recorder = new KeyedCall(this.keys, this.clock, this.logger, { appId, key, requestId }, ttlMs, this.config.idempotencyMaxAnswerBytes);
    try {
      return await call(recorder);
    } catch (err) {
      if (!recorder.detached) recorder.abandoned();
      throw err;
    }
  }
}

/** The header's value: a token, or an RFC 8941 sf-string (quoted) as the draft writes it. */
function readIdempotencyKey(headers: Headers): string | null {
  const raw = headers.get("idempotency-key");
  if (raw === null) return null;
  const key = raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"') ? raw.slice(1, -1) : raw;
  if (!/^[\x21-\x7e]{1,255}$/.test(key)) {
    throw new ApiError("invalid_request", "Idempotency-Key must be 1 to 255 visible ASCII characters");
  }
  return key;
}

/** Who pays and what was asked: the same key must mean the same request. */
function fingerprintOf(payer: Payer, body: unknown): Uint8Array {
  return createHash("sha256")
    .update(`user:${payer.appUserId ?? ""}\ngrant:${payer.grantToken ?? ""}\n`)
    .update(JSON.stringify(body))
    .digest();
}

function replay(answer: StoredAnswer): Response {
  if (answer.body === null) {
    throw new ApiError(
      "idempotency_conflict",
      "the request with this Idempotency-Key completed, but its answer was too large to keep for replay; send a new key to run it again",
      {},
      // Tells the openai SDK not to retry this 409.
      { "x-should-retry": "false" },
    );
  }
  const headers: Record<string, string> = { "content-type": answer.contentType, "idempotent-replayed": "true" };
  if (answer.generationId !== null) headers["x-generation-id"] = answer.generationId;
  if (answer.contentType === "text/event-stream") headers["cache-control"] = "no-cache";
  return new Response(answer.body, { status: answer.status, headers });
}

/** One claimed key while its call runs: renews the lease, gathers the answer, then settles the key once. */
class KeyedCall implements AnswerRecorder {
  private readonly chunks: Uint8Array[] = [];
  private bytes = 0;
  private settled = false;
  detached = false;
  private readonly renewTimer: ReturnType<typeof setInterval>;

  constructor(
    private readonly keys: IdempotencyKeyRepository,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly claim: { appId: string; key: string; requestId: string },
    private readonly ttlMs: number,
    private readonly maxAnswerBytes: number,
  ) {
    const renew = () => keys.renew(claim.appId, claim.key, claim.requestId, clock.now() + LEASE_MS);
    this.renewTimer = setInterval(() => this.guard("renewing", renew), RENEW_EVERY_MS);
    this.renewTimer.unref?.();
  }

  chunk(bytes: Uint8Array): void {
    if (this.bytes > this.maxAnswerBytes) return;
    this.bytes += bytes.byteLength;
    if (this.bytes <= this.maxAnswerBytes) this.chunks.push(bytes);
    else this.chunks.length = 0;
  }

  finished(answer: { contentType: string; generationId: string | null }): Promise<void> {
    if (!this.settle()) return Promise.resolve();
    const kept = this.bytes <= this.maxAnswerBytes ? Buffer.concat(this.chunks) : null;
    this.chunks.length = 0;
    const { appId, key, requestId } = this.claim;
    const stored = { status: 200, contentType: answer.contentType, generationId: answer.generationId, body: kept };
    return this.guard("keeping the answer", () => this.keys.complete(appId, key, requestId, stored, this.clock.now() + this.ttlMs));
  }

  detach(): void {
    this.detached = true;
  }

  failed(error: ApiError): void {
    if (!this.settle()) return;
    this.chunks.length = 0;
    const { appId, key, requestId } = this.claim;
    const stored = {
      status: error.status,
      contentType: "application/json",
      generationId: null,
      body: new TextEncoder().encode(JSON.stringify(error.toBody())),
    };
    void this.guard("keeping the error", () => this.keys.complete(appId, key, requestId, stored, this.clock.now() + this.ttlMs));
  }

  abandoned(): void {
    if (!this.settle()) return;
    this.chunks.length = 0;
    const { appId, key, requestId } = this.claim;
    this.guard("freeing the key", () => this.keys.release(appId, key, requestId));
  }

  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    clearInterval(this.renewTimer);
    return true;
  }

  /** The answer already went to the client: a failure here is logged, never thrown at it. */
  private guard(what: string, work: () => unknown): Promise<void> {
    const report = (err: unknown) => this.logger.error(`idempotency key: ${what} failed`, { requestId: this.claim.requestId, error: String(err) });
    try {
      return Promise.resolve(work()).then(() => {}, report);
    } catch (err) {
      report(err);
      return Promise.resolve();
    }
  }
}
