/**
 * The API half of OpenRouter's PKCE flow (spec: paths./auth/keys and ./auth/keys/code).
 *
 * POST /auth/keys `{ code, code_verifier?, code_challenge_method? }` → `{ key, user_id }`:
 * no bearer key (the spec lists no 401 for it: an app without a key of its own can call it).
 * A body that is not the spec's shape is a 400 and burns nothing. Every other answer burns
 * the code (./auth-codes.ts):
 * - unknown, already used or expired code: 400 (invalid request parameters);
 * - a method other than the one the code was made with: 400, "Invalid code_challenge_method";
 * - no verifier, or a malformed one, for a code made with a challenge (or one for a code made
 *   without): 400;
 * - a well-formed verifier that does not match the challenge: 403 (the caller failed to
 *   prove it started the flow: refused, as the spec's 403 "insufficient permissions").
 *
 * POST /auth/keys/code: the spec's server-side start of a flow, with the caller's key (401
 * without one): a code for the caller's own account, to exchange the same way.
 */
import { isWellFormedVerifier, verifierMatches, type AuthCodes } from "./auth-codes";
import { readAuthRequest } from "./auth-request";
import { authenticate } from "./bearer";
import { jsonError, jsonOk } from "./errors";
import type { KeyBook } from "./keys";

export async function handleKeyExchange(request: Request, codes: AuthCodes, keys: KeyBook): Promise<Response> {
  const body = await readJsonObject(request);
  if (body === null) return jsonError(400, "Request body must be a JSON object");
  const { code, code_verifier: verifier, code_challenge_method: method } = body;
  if (typeof code !== "string" || code === "") return jsonError(400, "code is required");
  if (method !== undefined && method !== null && method !== "S256" && method !== "plain") return jsonError(400, "Invalid code_challenge_method");
  if (verifier !== undefined && typeof verifier !== "string") return jsonError(400, "code_verifier must be a string");

  const grant = codes.take(code);
  if (grant === undefined) return jsonError(400, "Invalid code: unknown or already used");
  if (grant === "expired") return jsonError(400, "Invalid code: expired");
  const { pkce } = grant;
  if (pkce === null) {
    if (verifier !== undefined) return jsonError(400, "code_verifier given for a code made without a code_challenge");
  } else {
    if (method !== undefined && method !== null && method !== pkce.method) return jsonError(400, "Invalid code_challenge_method");
    if (verifier === undefined || !isWellFormedVerifier(verifier)) return jsonError(400, "code_verifier is missing or malformed");
    if (!verifierMatches(verifier, pkce)) return jsonError(403, "Invalid code_verifier");
  }
  const account = keys.create(grant.settings, grant.userId);
  return jsonOk({ key: account.key, user_id: account.userId });
}

export async function handleCodeCreation(request: Request, codes: AuthCodes, keys: KeyBook, now: number): Promise<Response> {
  const caller = authenticate(request, keys, now);
  if (!("account" in caller)) return jsonError(401, caller.message);
  const body = await readJsonObject(request);
  if (body === null) return jsonError(400, "Request body must be a JSON object");
  const checked = readAuthRequest(body);
  if ("error" in checked) return jsonError(400, checked.error);
  const { pkce, settings } = checked.ok;
  const { code, createdAt } = codes.issue({ pkce, settings, userId: caller.account.userId });
  // The mock has no registered apps: app_id is 0.
  return jsonOk({ data: { id: code, app_id: 0, created_at: new Date(createdAt).toISOString() } });
}

async function readJsonObject(request: Request): Promise<Record<string, unknown> | null> {
  try {
    const body = (await request.json()) as unknown;
    return body !== null && typeof body === "object" && !Array.isArray(body) ? (body as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
