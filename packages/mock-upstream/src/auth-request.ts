/**
 * What starts a PKCE flow, read and checked the same way wherever it comes from: the /auth
 * page's query and its form (./auth-page.ts), and POST /auth/keys/code's body
 * (./auth-keys.ts), whose schema in the spec names the fields: `callback_url` (required),
 * `code_challenge`, `code_challenge_method`, `limit`, `usage_limit_type`, `key_label`,
 * `expires_at`.
 */
import { isWellFormedChallenge, type ChallengeMethod, type PkceChallenge } from "./auth-codes";
import { isUsageLimitType } from "./key-usage";
import type { KeySettings } from "./keys";

export interface AuthRequest {
  callbackUrl: string;
  pkce: PkceChallenge | null;
  settings: KeySettings;
}

export type Checked<T> = { ok: T } | { error: string };

/** The spec's `key_label` maxLength. */
const LABEL_MAX = 100;

/**
 * The spec's rule for callback URLs: "https URLs and localhost/127.0.0.1 URLs on any port for
 * local CLI tools". Without a fragment, as OAuth requires of redirection URIs (the code is
 * added to the query, and a fragment would hide it from the server).
 */
export function checkCallbackUrl(raw: string): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return "callback_url is not a URL";
  }
  const local = url.hostname === "localhost" || url.hostname === "127.0.0.1";
  if (url.protocol !== "https:" && !(url.protocol === "http:" && local)) return "callback_url must be https, or http on localhost or 127.0.0.1";
  if (url.hash !== "" || raw.includes("#")) return "callback_url must not have a fragment";
  return null;
}

/** Reads the fields from query or form values (strings) or a JSON body (numbers allowed where the spec has them). */
export function readAuthRequest(fields: Record<string, unknown>): Checked<AuthRequest> {
  const callbackUrl = fields.callback_url;
  if (typeof callbackUrl !== "string" || callbackUrl === "") return { error: "callback_url is required" };
  const callbackProblem = checkCallbackUrl(callbackUrl);
  if (callbackProblem) return { error: callbackProblem };

  const pkce = readChallenge(fields.code_challenge, fields.code_challenge_method);
  if ("error" in pkce) return pkce;
  const limit = readLimit(fields.limit);
  if (typeof limit === "object" && limit !== null) return limit;

  const limitType = blankToNull(fields.usage_limit_type);
  if (limitType !== null && !isUsageLimitType(limitType)) return { error: "usage_limit_type must be daily, weekly or monthly" };
  const label = blankToNull(fields.key_label);
  if (label !== null && (typeof label !== "string" || label.length > LABEL_MAX))
    return { error: `key_label must be a string of at most ${LABEL_MAX} characters` };
  const expires = blankToNull(fields.expires_at);
  const expiresAt = typeof expires === "string" ? Date.parse(expires) : expires === null ? null : NaN;
  if (expiresAt !== null && !Number.isFinite(expiresAt)) return { error: "expires_at must be an ISO 8601 date-time" };

  return { ok: { callbackUrl, pkce: pkce.ok, settings: { limitUsd: limit, usageLimitType: limitType, label, expiresAt } } };
}

/**
 * A challenge without a method is `plain` (RFC 7636 §4.3); a method without a challenge is
 * an error. The spec makes the challenge optional: without one, the exchange needs no verifier.
 */
function readChallenge(rawChallenge: unknown, rawMethod: unknown): Checked<PkceChallenge | null> {
  const challenge = blankToNull(rawChallenge);
  const method = blankToNull(rawMethod) ?? (challenge === null ? null : "plain");
  if (challenge === null) return method === null ? { ok: null } : { error: "code_challenge_method needs a code_challenge" };
  if (method !== "S256" && method !== "plain") return { error: "code_challenge_method must be S256 or plain" };
  if (typeof challenge !== "string" || !isWellFormedChallenge(challenge, method as ChallengeMethod)) {
    return { error: `code_challenge is not a valid ${method} challenge` };
  }
  return { ok: { challenge, method } };
}

/** USD, a number or a decimal string; absent or blank: no limit. */
export function readLimit(raw: unknown): number | null | { error: string } {
  const value = blankToNull(raw);
  if (value === null) return null;
  const usd = typeof value === "string" ? Number(value.trim()) : value;
  if (typeof usd !== "number" || !Number.isFinite(usd) || usd < 0) return { error: "limit must be a number of USD, 0 or more" };
  return usd;
}

function blankToNull(value: unknown): unknown {
  return value === undefined || value === null || value === "" ? null : value;
}
