import { hashSecret, secretMatches } from "./secret-key";
import type { Clock } from "../clock";
import { ApiError } from "../errors";
import type { RateLimiter, RateLimitRule } from "../ratelimit/rate-limiter";
import { bearerCredential } from "./credentials";

/**
 * The operator's credential for /api/v1/admin/* (`ADMIN_TOKEN`). Unset, the admin API is
 * off and answers 404, as /metrics does without its token. App secret keys and session
 * tokens are never admin credentials, nor the admin token an app credential: each kind is
 * checked only by its own guard (ARCHITECTURE.md §3 "Security").
 */
export class AdminTokenGuard {
  /** SHA-256 of the token: digests have one length, so comparing them leaks neither bytes nor length. */
  private readonly expected: Uint8Array | null;
  /** Addresses refused until a time (ms), learned when the shared limiter says their failures ran out. */
  private readonly lockedUntil = new Map<string, number>();

  constructor(
    token: string | undefined,
    private readonly limiter: RateLimiter,
    private readonly failures: RateLimitRule,
    private readonly clock: Clock,
  ) {
    this.expected = token ? hashSecret(token) : null;
  }

  /**
   * Passes, or throws: 404 when the API is off, 401 for a missing or wrong token, 429 for a
   * wrong token once its address has failed `failures.limit` times in a window.
   *
   * The right token is compared first and always passes: behind a reverse proxy every
   * client shares one address, and strangers' failures must not lock the operator out.
   * Only a wrong token counts as a failure. A request with no Bearer credential is refused
   * without counting: it guesses nothing, and counting it would let anyone who can reach
   * the port start a lockout. Guessing stays throttled: during a lockout a wrong token gets
   * 429 and is not counted again (the window is not pushed further out).
   */
  async check(authorization: string | null, address: string): Promise<void> {
    if (!this.expected) throw new ApiError("not_found", "the admin API is off: set ADMIN_TOKEN to serve it");
    // Throws 401 for a missing or non-Bearer header, before anything is counted.
    const presented = bearerCredential(authorization);
    // Digests of one length, compared in constant time: neither bytes nor length leak.
    if (secretMatches(presented, this.expected)) return;
    const now = this.clock.now();
    const until = this.lockedUntil.get(address);
    if (until !== undefined && until > now) throw lockedOut(until - now);
    const decision = await this.limiter.check(this.failures, address);
    if (decision.allowed) throw new ApiError("auth", "invalid admin token");
    this.lock(address, now + decision.resetMs, now);
    throw lockedOut(decision.resetMs);
  }

  private lock(address: string, until: number, now: number): void {
    for (const [known, time] of this.lockedUntil) if (time <= now) this.lockedUntil.delete(known);
    this.lockedUntil.set(address, until);
  }
}

function lockedOut(resetMs: number): ApiError {
  const seconds = Math.max(1, Math.ceil(resetMs / 1000));
  return new ApiError("rate_limited", `too many failed admin authentications from this address; retry in ${seconds} s`, {}, { "retry-after": String(seconds) });
}
