import { ApiError } from "../errors";
import type { App } from "../store/apps";
import type { Store } from "../store";
import { parseSecretKey, secretMatches } from "./secret-key";
import type { SessionClaims, SessionTokens } from "./session-token";

/** Extracts the credential from `Authorization: Bearer <credential>` (RFC 6750 §2.1). */
export function bearerCredential(header: string | null): string {
  if (!header) throw new ApiError("auth", "missing Authorization header");
  const m = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  if (!m) throw new ApiError("auth", "Authorization header must be 'Bearer <credential>'");
  return m[1]!;
}

/**
 * Resolves a secret key to its active app and the id of the key that matched (session tokens
 * name it), or throws 401 `auth` ("this app is disabled" for a right key of a disabled app).
 */
export async function authenticateSecretKey(store: Pick<Store, "apps">, header: string | null): Promise<{ app: App; keyId: string }> {
  const credential = bearerCredential(header);
  const parsed = parseSecretKey(credential);
  if (!parsed) {
    const hint = credential.split(".").length === 3 ? ": this endpoint takes a secret key, not a session token" : "";
    throw new ApiError("auth", `invalid secret key${hint}`);
  }
  // Compare against every active key of the app (rotation keeps several) in constant
  // time each; never short-circuit on a prefix.
  let matched: string | null = null;
  for (const key of await store.apps.activeKeysOf(parsed.appId)) {
    if (secretMatches(parsed.secret, key.secretHash)) matched = key.id;
  }
  const app = matched !== null ? await store.apps.find(parsed.appId) : null;
  if (!app || matched === null) throw new ApiError("auth", "invalid secret key");
  // Said only to the holder of a key that verified: a stranger guessing keys gets "invalid
  // secret key" for a disabled app as for any other, so this tells them nothing.
  if (app.disabledAt !== null) throw appDisabled();
  return { app, keyId: matched };
}

/** Resolves a session JWT to its claims and active app, or throws 401 `auth` ("this app is disabled" for a genuine token of a disabled app). */
export async function authenticateSession(
  store: Pick<Store, "apps">,
  tokens: SessionTokens,
  header: string | null,
): Promise<{ app: App; session: SessionClaims }> {
  const credential = bearerCredential(header);
  if (credential.startsWith("sk_")) {
    throw new ApiError("auth", "this endpoint takes a session token, not a secret key");
  }
  const session = await tokens.verify(credential);
  const app = await store.apps.find(session.appId);
  if (!app) throw new ApiError("auth", "invalid session token");
  // A token lives only as long as the key that minted it: revoked, the key takes its tokens
  // with it, on every instance at once (the active keys are the read cache's, dropped on change).
  const keys = await store.apps.activeKeysOf(app.id);
  if (!keys.some((key) => key.id === session.keyId)) throw new ApiError("auth", "invalid session token");
  // The token's signature verified: only the service mints those, so its holder already knows the app.
  if (app.disabledAt !== null) throw appDisabled();
  return { app, session };
}

/**
 * A genuine credential of an app the operator disabled: 401 `auth` like every refused
 * credential, worded so that its holder looks at the app and not at the key. Enabling the
 * app makes the same key and unexpired tokens work again.
 */
function appDisabled(): ApiError {
  return new ApiError("auth", "this app is disabled");
}
