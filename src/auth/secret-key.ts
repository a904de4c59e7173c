import { timingSafeEqual } from "node:crypto";
import { randomString } from "../random";

/**
 * Secret keys: `sk_live_{appId}_{secret}`. Only SHA-256 of the secret part is stored;
 * the secret is high-entropy (190 bits), so a fast hash is enough and no salt is needed.
 */
const PREFIX = "sk_live_";
const SECRET_LENGTH = 32;
const KEY_PATTERN = /^sk_live_([a-z0-9]{4,64})_([0-9A-Za-z]{32})$/;

export function generateSecret(): string {
  return randomString(SECRET_LENGTH);
}

export function formatSecretKey(appId: string, secret: string): string {
  return `${PREFIX}${appId}_${secret}`;
}

export function parseSecretKey(raw: string): { appId: string; secret: string } | null {
  const m = KEY_PATTERN.exec(raw);
  return m ? { appId: m[1]!, secret: m[2]! } : null;
}

/** SHA-256 of the secret (Bun's own: about a quarter of node:crypto's createHash per call, ARCHITECTURE.md §7 "Secret hash"). */
export function hashSecret(secret: string): Uint8Array {
  return Bun.SHA256.hash(secret) as Uint8Array;
}

/** Constant-time comparison of a presented secret with a stored hash. */
export function secretMatches(secret: string, storedHash: Uint8Array): boolean {
  const presented = hashSecret(secret);
  return presented.length === storedHash.length && timingSafeEqual(presented, storedHash);
}
