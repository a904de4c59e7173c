/**
 * Pending funding flows: a user who chose to pay with their own upstream account is sent to
 * the upstream's OAuth PKCE page (RFC 7636) and comes back with a code; this row holds what
 * the service needs between the two, for at most its lifetime:
 * - the `state` sent in the callback URL, stored only as its SHA-256 (like consent tokens):
 *   a copy of the database cannot complete anyone's flow;
 * - the code verifier, sealed (src/secrets/secret-box.ts): the app never sees it, and the
 *   database alone does not hold it;
 * - the session it was started from (its session token's `jti`), so a callback can be
 *   completed only by the session that began it;
 * - the monthly cap the user approved, applied when the key is linked.
 * A state is taken once: the row is deleted by the take that returns it.
 */
import { createHash } from "node:crypto";
import { randomString } from "../random";

export interface NewFundingFlow {
  appId: string;
  appUserId: string;
  /** What identifies the session that starts the flow: its session token's `jti`. */
  sessionId: string;
  /** The PKCE code verifier (RFC 7636 §4.1), plaintext: the store seals it. */
  codeVerifier: string;
  monthlyCapNano: number;
}

export interface FundingFlow extends NewFundingFlow {
  createdAt: number;
  expiresAt: number;
}

/** A sealed code verifier as stored, by the base64url of its state's hash: for key rotation and `secrets reset`. */
export interface StoredFlowVerifier {
  stateHash: string;
  stored: string;
}

export interface FundingFlowRepository {
  /** Records a flow that lives `lifetimeMs`; returns its state (`fs_` and 40 random characters), for the callback URL. */
  create(flow: NewFundingFlow, now: number, lifetimeMs: number): Promise<string>;
  /**
   * Deletes the flow of `state` and returns it, opened, when it has not expired at `now` and
   * was started by `sessionId`; null otherwise. Single use: the row is deleted whatever the
   * answer, so a state tried with another session or too late cannot be tried again.
   */
  take(state: string, sessionId: string, now: number): Promise<FundingFlow | null>;
  /** Deletes up to `limit` flows that expired at or before `cutoff`; returns how many (callers loop in batches). */
  purgeExpired(cutoff: number, limit: number): Promise<number>;
  storedVerifiers(): Promise<StoredFlowVerifier[]>;
  /** Replaces a sealed verifier only while it is still `expected` (compare and set); true when it did. */
  replaceStoredVerifier(stateHash: string, expected: string, replacement: string): Promise<boolean>;
  /** Deletes a flow whose verifier is still `expected` (one the key in hand cannot open); true when it did. */
  forget(stateHash: string, expected: string): Promise<boolean>;
}

export const newFundingState = () => `fs_${randomString(40)}`;

/** A state's hash as the row's key: base64url of its SHA-256 (a high-entropy token, so a plain hash). */
export const fundingStateHash = (state: string): string => createHash("sha256").update(state).digest("base64url");
