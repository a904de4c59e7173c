import { createHash } from "node:crypto";

export type FundingStatus = "ok" | "invalid";

/**
 * Who pays a connection's calls: `app`, the operator's upstream key; `user`, the user's own
 * upstream key, linked through the upstream's PKCE flow and kept sealed (ARCHITECTURE.md §3
 * "Secrets at rest").
 */
export type FundingSource = "app" | "user";
export const FUNDING_SOURCES: readonly FundingSource[] = ["app", "user"];

/** A linked user key as views may show it: what identifies it, never the key. */
export interface LinkedUserKey {
  /** `sha256:` and the first 12 hex digits of the key's SHA-256: tells two keys apart, reveals nothing usable. */
  fingerprint: string;
  linkedAt: number;
}

export interface Connection {
  appId: string;
  appUserId: string;
  monthlyCapNano: number;
  fundingStatus: FundingStatus;
  fundingSource: FundingSource;
  /** The user's key while `fundingSource` is `user` and one is linked; null otherwise. */
  userKey: LinkedUserKey | null;
  connectedAt: number;
  updatedAt: number;
  revokedAt: number | null;
}

/**
 * How an approval says who pays. Left out, an approval keeps the connection's source (a new
 * connection: `app`). `app` drops a linked user key; `user` links `upstreamKey` (plaintext:
 * the store seals it in the same transaction), replacing a key linked before.
 */
export type FundingChoice = { source: "app" } | { source: "user"; upstreamKey: string };

/** A sealed user key as stored: for key rotation and `secrets reset` (src/store/stored-secrets.ts). */
export interface StoredUserKey {
  appId: string;
  appUserId: string;
  stored: string;
}

/** A user's approval of a monthly cap for one app. Every query is scoped by app id. */
export interface ConnectionRepository {
  /** The connection row, active or revoked; null if the user never connected. */
  find(appId: string, appUserId: string): Promise<Connection | null>;
  /** The connection if it is active (not revoked). */
  findActive(appId: string, appUserId: string): Promise<Connection | null>;
  /**
   * Approves or updates, in one transaction with its webhook event: sets the cap, un-revokes,
   * and applies `funding` (see FundingChoice). A fresh approval after a revoke counts as a new
   * connection (connectedAt moves). Funding status goes back to `ok`, except on a connection
   * the user pays for approved without a new key: a refused key stays refused until the user
   * links one again (the same PKCE flow).
   */
  approve(appId: string, appUserId: string, monthlyCapNano: number, now: number, funding?: FundingChoice): Promise<Connection>;
  /** An app's connections (active and revoked), by user id, a page after `afterUserId`. */
  listForApp(appId: string, limit: number, afterUserId?: string): Promise<Connection[]>;
  /**
   * Revokes; revoking an absent or already revoked connection is a no-op. A linked user key
   * is deleted with it (SQLite: scrubbed from the file) and the source goes back to `app`.
   */
  revoke(appId: string, appUserId: string, now: number): Promise<void>;
  /** Marks the connection's funding invalid (upstream said payment required). */
  markFundingInvalid(appId: string, appUserId: string, now: number): Promise<void>;
  /**
   * The user's own upstream key, opened: only for the chat call that pays with it (never
   * for a view, a log line or an answer). Null unless the connection is active, funded by
   * the user and holds a key. Throws SealedSecretError when the key in hand does not open it.
   */
  userUpstreamKey(appId: string, appUserId: string): Promise<string | null>;
  /** Every linked user key, sealed as stored. */
  storedUserKeys(): Promise<StoredUserKey[]>;
  /** Replaces a stored user key only while it is still `expected` (compare and set, a re-seal); true when it did. */
  replaceStoredUserKey(appId: string, appUserId: string, expected: string, replacement: string): Promise<boolean>;
  /**
   * Deletes a user key that can no longer be opened (the secrets key was lost), while it is
   * still `expected`: the connection stays funded by the user, marked funding invalid (with
   * its webhook event) until the user links a key again. True when it did.
   */
  forgetUserKey(appId: string, appUserId: string, expected: string, now: number): Promise<boolean>;
}

/** A user key's fingerprint (LinkedUserKey.fingerprint). */
export const userKeyFingerprint = (upstreamKey: string): string => `sha256:${createHash("sha256").update(upstreamKey).digest("hex").slice(0, 12)}`;
