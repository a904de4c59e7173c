import { SignJWT, jwtVerify, errors as joseErrors } from "jose";
import { ApiError } from "../errors";
import type { Clock } from "../clock";
import { appUserIdProblem } from "./app-user-id";

/**
 * Session JWTs for app browser code (10 minutes by default). HS256 only: the algorithm
 * is pinned on both sides so `alg: none` or an RS/HS confusion cannot be accepted.
 * Explicit typing through the `typ` header follows RFC 8725 §3.11.
 */
export const SESSION_ALG = "HS256";
export const SESSION_TYP = "session+jwt";
export const SESSION_ISSUER = "metered-proxy";
export const SESSION_AUDIENCE = "metered-proxy:connections";

export interface SessionClaims {
  appId: string;
  /** The id of the secret key that minted the token: revoking that key ends the token (authenticateSession). */
  keyId: string;
  appUserId: string;
  /** The cap the app asked the user to approve, if it named one. */
  requestLimitUsd: number | null;
  jti: string;
  expiresAt: number;
}

export class SessionTokens {
  constructor(
    private readonly key: Uint8Array,
    private readonly clock: Clock,
    private readonly ttlSeconds: number,
  ) {}

  /** A token for `appUserId` of `appId`, minted with the app's secret key `keyId` (a key's id, never its secret). */
  async mint(appId: string, keyId: string, appUserId: string, requestLimitUsd: number | null): Promise<{ token: string; expiresAt: number }> {
    const iat = Math.floor(this.clock.now() / 1000);
    const expiresAt = iat + this.ttlSeconds;
    const claims: Record<string, unknown> = { app_id: appId, key_id: keyId };
    if (requestLimitUsd !== null) claims.request_limit = { monthlyUsd: requestLimitUsd };
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: SESSION_ALG, typ: SESSION_TYP })
      .setIssuer(SESSION_ISSUER)
      .setAudience(SESSION_AUDIENCE)
      .setSubject(appUserId)
      .setIssuedAt(iat)
      .setExpirationTime(expiresAt)
      .setJti(crypto.randomUUID())
      .sign(this.key);
    return { token, expiresAt };
  }

  /** Verifies a token; any failure is 401 `auth` with a message that leaks nothing. */
  async verify(token: string): Promise<SessionClaims> {
    try {
      const { payload } = await jwtVerify(token, this.key, {
        algorithms: [SESSION_ALG],
        typ: SESSION_TYP,
        issuer: SESSION_ISSUER,
        audience: SESSION_AUDIENCE,
        requiredClaims: ["iss", "aud", "sub", "iat", "exp", "jti"],
        // Also checks `iat`: a token "issued" in the future is refused (jose's check of iat
        // against maxTokenAge), and no token outlives the TTL, whatever its `exp` says.
        maxTokenAge: this.ttlSeconds,
        currentDate: new Date(this.clock.now()),
      });
      const appId = payload.app_id;
      const keyId = payload.key_id;
      const limit = (payload.request_limit as { monthlyUsd?: unknown } | undefined)?.monthlyUsd;
      // The subject is held to the rule its mint was (a token from before the rule may break it).
      if (
        typeof appId !== "string" ||
        typeof keyId !== "string" ||
        !keyId ||
        !payload.sub ||
        appUserIdProblem(payload.sub) !== null ||
        !payload.jti ||
        typeof payload.exp !== "number"
      ) {
        throw new ApiError("auth", "invalid session token");
      }
      if (limit !== undefined && (typeof limit !== "number" || !Number.isFinite(limit) || limit <= 0)) {
        throw new ApiError("auth", "invalid session token");
      }
      return {
        appId,
        keyId,
        appUserId: payload.sub,
        requestLimitUsd: limit ?? null,
        jti: payload.jti,
        expiresAt: payload.exp,
      };
    } catch (err) {
      if (err instanceof ApiError) throw err;
      if (err instanceof joseErrors.JWTExpired) throw new ApiError("auth", "session token expired");
      throw new ApiError("auth", "invalid session token");
    }
  }
}
