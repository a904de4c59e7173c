/**
 * The authorization codes of OpenRouter's PKCE flow (spec: POST /auth/keys and
 * /auth/keys/code): a code is made when the user approves on the /auth page (./auth-page.ts)
 * or by POST /auth/keys/code, bound to the PKCE challenge and to the settings of the key it
 * will create, and lives 10 minutes on the mock's clock. It is single-use: the first exchange
 * that names it burns it, whether or not the exchange succeeds (OAuth 2.1's rule for codes), so
 * a code that leaked gives its holder one guess at the verifier and no second try.
 */
import { timingSafeEqual } from "node:crypto";
import type { KeySettings } from "./keys";

/** How long a code can be exchanged, on the mock's clock. */
export const CODE_LIFETIME_MS = 10 * 60_000;

/** The spec's `code_challenge_method` values. */
export type ChallengeMethod = "S256" | "plain";

export interface PkceChallenge {
  challenge: string;
  method: ChallengeMethod;
}

export interface PendingCode {
  /** Null when the flow was started without a challenge (the spec makes it optional). */
  pkce: PkceChallenge | null;
  settings: KeySettings;
  /** The account the key will belong to (its `user_id`). */
  userId: string;
  createdAt: number;
  expiresAt: number;
}

/** RFC 7636 §4.1: a verifier is 43 to 128 unreserved characters. */
const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
/** BASE64URL(SHA256(…)) without padding is 43 characters; `plain` challenges are verifiers. */
const S256_CHALLENGE = /^[A-Za-z0-9\-_]{43}$/;

export function isWellFormedVerifier(verifier: string): boolean {
  return VERIFIER.test(verifier);
}

export function isWellFormedChallenge(challenge: string, method: ChallengeMethod): boolean {
  return method === "S256" ? S256_CHALLENGE.test(challenge) : VERIFIER.test(challenge);
}

/** RFC 7636 §4.6: S256 compares BASE64URL(SHA256(verifier)) with the challenge; plain, the verifier itself. */
export function verifierMatches(verifier: string, pkce: PkceChallenge): boolean {
  const derived = pkce.method === "S256" ? new Bun.CryptoHasher("sha256").update(verifier).digest("base64url") : verifier;
  const a = Buffer.from(derived);
  const b = Buffer.from(pkce.challenge);
  return a.length === b.length && timingSafeEqual(a, b);
}

export class AuthCodes {
  private readonly pending = new Map<string, PendingCode>();

  constructor(private readonly now: () => number) {}

  /** A fresh code for this grant. */
  issue(grant: Omit<PendingCode, "createdAt" | "expiresAt">): { code: string; createdAt: number } {
    const createdAt = this.now();
    this.dropExpired(createdAt);
    const bytes = crypto.getRandomValues(new Uint8Array(24));
    const code = `auth_code_${Buffer.from(bytes).toString("base64url")}`;
    this.pending.set(code, { ...grant, createdAt, expiresAt: createdAt + CODE_LIFETIME_MS });
    return { code, createdAt };
  }

  /** Burns the code: its grant while it was valid; "expired" past its 10 minutes; undefined if unknown or already used. */
  take(code: string): PendingCode | "expired" | undefined {
    const grant = this.pending.get(code);
    if (!grant) return undefined;
    this.pending.delete(code);
    return this.now() >= grant.expiresAt ? "expired" : grant;
  }

  /** Codes nobody exchanged would pile up in a long demo run: forget the expired ones. */
  private dropExpired(now: number): void {
    for (const [code, grant] of this.pending) if (now >= grant.expiresAt) this.pending.delete(code);
  }
}
