import { createHash } from "node:crypto";
import { ApiError } from "../errors";
import { appUserIdFromHeader } from "../auth/app-user-id";

/** Exactly one payer: what a chat call's budget is looked up by. */
export type RequiredPayer = { kind: "user"; appUserId: string } | { kind: "grant"; grantToken: string };

/**
 * Who pays for a chat call, as its request says: one of the app's users (`x-service-user`,
 * percent-encoded UTF-8: src/auth/app-user-id.ts) or a one-time grant (`x-service-grant`).
 * Read from the headers once per request (its RequestContext); the rate limit, the
 * Idempotency-Key and the budget all ask this one. An empty header counts as absent; a
 * header that is no user id counts as no user, and `required` refuses it.
 */
export class Payer {
  private constructor(
    readonly appUserId: string | null,
    /** A secret: never logged, never part of a key name (see `key`). */
    readonly grantToken: string | null,
    /** Why `x-service-user` is no user id (400), or null. */
    private readonly userRefusal: ApiError | null = null,
  ) {}

  static of(headers: Headers): Payer {
    const grantToken = headers.get("x-service-grant") || null;
    const header = headers.get("x-service-user") || null;
    if (header === null) return new Payer(null, grantToken);
    try {
      return new Payer(appUserIdFromHeader(header), grantToken);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      return new Payer(null, grantToken, err);
    }
  }

  /**
   * Names the payer in a key (the chat rate limit counts per app and payer): the grant when
   * there is one, else the user. A digest of the grant, not its token: secrets never become
   * Redis key names.
   */
  get key(): string {
    if (this.grantToken !== null) return `grant:${createHash("sha256").update(this.grantToken).digest("base64url").slice(0, 22)}`;
    return `user:${this.appUserId ?? ""}`;
  }

  /** The one payer a call draws on, or 400 when the request names both or neither. */
  required(): RequiredPayer {
    if (this.userRefusal) throw this.userRefusal;
    if (this.appUserId !== null && this.grantToken !== null) {
      throw new ApiError("invalid_request", "send either x-service-user or x-service-grant, not both");
    }
    if (this.grantToken !== null) return { kind: "grant", grantToken: this.grantToken };
    if (this.appUserId === null) throw new ApiError("invalid_request", "the x-service-user (or x-service-grant) header is required");
    return { kind: "user", appUserId: this.appUserId };
  }
}
