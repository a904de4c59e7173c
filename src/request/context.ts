import type { ApiError } from "../errors";
import type { App } from "../store/apps";
import type { SessionClaims } from "../auth/session-token";
import { clientRequestId } from "../upstream/headers";
import { Payer } from "./payer";

/**
 * What one request's access line says beyond its method, route and status (written by
 * src/http/access-log.ts once the response is done). Ids and numbers only: never a secret
 * key, a session or grant token, or the Authorization header. Filled in as the request
 * goes: the guards name the app and user, a chat call its model and cost.
 *
 * It is the part of a request that outlives it: a stream's metering writes its cost here
 * after the handler returned, so it holds nothing of the client's request (no body).
 */
export interface AccessFields {
  appId?: string;
  appUserId?: string | null;
  grantId?: string | null;
  errorCode?: string;
  /** Chat calls: the model asked for, and the cost charged. */
  model?: string;
  costNano?: number;
  /** Chat streams: settles when the stream is metered; the line waits for it. */
  metered?: Promise<void>;
  /** Chat calls: whether the client asked for a stream, and when the response's headers were ready. */
  streamed?: boolean;
  headersAt?: number;
}

/**
 * Everything one request carries from hook to hook, made once by the first hook that runs
 * (src/http/request-context.ts, onRequest) and found on Elysia's context as
 * `requestContext` by every later one: parse, transform, the guards, the handler, onError
 * and onAfterResponse. Nothing per request is kept anywhere else.
 *
 * It never holds the Request or its body: a stream keeps its access fields until it is
 * metered, and a prompt must be freed once it has gone upstream.
 */
export class RequestContext {
  /** When the request came in (performance.now()): the access line's latency counts from here. */
  readonly startedAt = performance.now();
  /**
   * Our `x-request-id`, on every response (errors too). Time-ordered (UUIDv7): it is the usage
   * ledger's primary key, and random ids scatter inserts across its index (31.5k vs 167k
   * rows/s on a 1M-row ledger, ARCHITECTURE.md §7 "Time-ordered request ids"). The cost: an
   * id reveals the millisecond it was made.
   */
  readonly requestId = Bun.randomUUIDv7();
  /** The client's own `x-request-id`, when it is valid (see clientRequestId). */
  readonly clientRequestId: string | undefined;
  /** Who the request says pays for a chat call, read from its headers once. */
  readonly payer: Payer;
  readonly log: AccessFields = {};

  /** The app calling, once its secret key or session token passed (src/http/auth-macro.ts). */
  app: App | undefined = undefined;
  /** On session-token routes, the token's claims once it passed. */
  session: SessionClaims | undefined = undefined;
  /** On secret-key routes, the id of the key that passed (a session token minted here names it). */
  secretKeyId: string | undefined = undefined;
  /** True once the operator's admin token passed (src/auth/admin-token.ts). */
  operator = false;
  /**
   * Why the body was refused while it was read (too large, past the JSON bounds, a form):
   * kept because Elysia drops parse errors of optional bodies (src/http/body-limit.ts).
   */
  bodyRefusal: ApiError | undefined = undefined;

  /**
   * `clientAddress`: who the request comes from, for the limits that count per client: the
   * connection's peer, or behind a trusted proxy the forwarded address (src/request/client-address.ts).
   */
  constructor(
    headers: Headers,
    readonly clientAddress = "unknown",
  ) {
    this.clientRequestId = clientRequestId(headers);
    this.payer = Payer.of(headers);
  }

  /** The guards' one way to say who is calling: kept for the handler and named in the access line. */
  authenticated(app: App, session?: SessionClaims, secretKeyId?: string): void {
    this.app = app;
    this.secretKeyId = secretKeyId;
    this.log.appId = app.id;
    if (session) {
      this.session = session;
      this.log.appUserId = session.appUserId;
    }
  }
}
