/**
 * `@metered-proxy/client/server`: the library for an app's backend, which holds the secret key
 * (README "Client library (server side)"). It mints session tokens for the app's browser code,
 * reads a user's budget and ledger, presets an `openai` client for metered chat calls, and
 * verifies webhook deliveries. Every failure the service answers is thrown as a ProxyError.
 */
import type OpenAI from "openai";
import { presetChatClient, type ChatClientOptions, type ChatPayer } from "./chat.js";
import { apiBaseOf, requestJson, type ApiTarget, type FetchLike } from "./http.js";
import { assertNotInBrowser } from "./runtime.js";
import type { SessionToken, UsagePage, UserStatus } from "./types.js";

export interface ServerClientOptions {
  /** The service's address, e.g. `http://localhost:8787` (the API is under its `/api/v1`). */
  baseUrl: string;
  /** The app's secret key, `sk_live_…` (printed once by `app create` or `key rotate`). */
  secretKey: string;
  /** A `fetch` to use instead of the global one (also given to the `openai` client of `chat()`). */
  fetch?: FetchLike;
}

/** POST /sessions' body, field for field (README "API at a glance"). */
export interface CreateSessionInput {
  /** The user as the app knows them (1 to 256 characters; opaque to the service). */
  appUserId: string;
  /** The monthly cap to ask the user to approve, USD; the user may approve less, never more. Without it the browser code names one. */
  requestLimit?: { monthlyUsd: number };
  /**
   * @deprecated Since 0.2.0: use `requestLimit: { monthlyUsd }`, the API's own name. Still
   * sent as that for 0.2.x and 0.3.x; removed in 0.4.0.
   */
  requestLimitUsd?: number;
}

export interface ListUsageOptions {
  /** YYYY-MM (UTC); default the current period. */
  period?: string;
  /** The previous page's `nextCursor`. */
  cursor?: string;
  /** Rows per page, 1 to 500; default 50. */
  limit?: number;
}

export interface ServerClient {
  /** POST /sessions: a 10-minute session token for the user's browser code (approve, read, revoke their connection). */
  createSession(input: CreateSessionInput): Promise<SessionToken>;
  /** GET /status: the user's connection, cap, spend and what is left. */
  getStatus(appUserId: string): Promise<UserStatus>;
  /** GET /usage: one page of the user's metered calls, newest first. */
  listUsage(appUserId: string, options?: ListUsageOptions): Promise<UsagePage>;
  /**
   * An `openai` client whose calls are metered against the user's budget (or the grant's).
   * The service's error answers are thrown as ProxyError classes (e.g. `BudgetExceededError`);
   * connection errors, timeouts and aborts stay the SDK's.
   */
  chat(payer: ChatPayer, options?: ChatClientOptions): OpenAI;
}

export function createServerClient(options: ServerClientOptions): ServerClient {
  assertNotInBrowser("@metered-proxy/client/server");
  if (typeof options.secretKey !== "string" || options.secretKey.length === 0) throw new TypeError("createServerClient: secretKey is required");
  const target: ApiTarget = {
    apiBase: apiBaseOf(options.baseUrl),
    bearer: options.secretKey,
    fetch: options.fetch ?? ((input, init) => fetch(input, init)),
  };
  return {
    // async, so that a refused input rejects like every other failure of the call.
    createSession: async (input) => requestJson<SessionToken>(target, "POST", "/sessions", { body: sessionBody(input) }),
    getStatus: (appUserId) => requestJson<UserStatus>(target, "GET", "/status", { query: { appUserId } }),
    listUsage: (appUserId, { period, cursor, limit } = {}) => requestJson<UsagePage>(target, "GET", "/usage", { query: { appUserId, period, cursor, limit } }),
    chat: (payer, chatOptions) => presetChatClient(target.apiBase, target.bearer, target.fetch, payer, chatOptions),
  };
}

/** The API's body; the deprecated `requestLimitUsd` becomes `requestLimit`, and both at once are refused as ambiguous. */
function sessionBody({ appUserId, requestLimit, requestLimitUsd }: CreateSessionInput): { appUserId: string; requestLimit?: { monthlyUsd: number } } {
  if (requestLimit !== undefined && requestLimitUsd !== undefined) {
    throw new TypeError("createSession: pass requestLimit: { monthlyUsd } alone (requestLimitUsd is its deprecated name)");
  }
  const limit = requestLimit ?? (requestLimitUsd === undefined ? undefined : { monthlyUsd: requestLimitUsd });
  return limit === undefined ? { appUserId } : { appUserId, requestLimit: { monthlyUsd: limit.monthlyUsd } };
}

export type { ChatClientOptions, ChatPayer } from "./chat.js";
export type { FetchLike } from "./http.js";
export type { Period, SessionToken, UpstreamCredit, UsagePage, UsageRow, UserStatus } from "./types.js";
export { toProxyError } from "./envelope.js";
export {
  AuthError,
  BudgetExceededError,
  ERROR_CODES,
  FundingInvalidError,
  GrantInvalidError,
  IdempotencyConflictError,
  IdempotencyMismatchError,
  InternalError,
  InvalidRequestError,
  NotConnectedError,
  NotFoundError,
  PayloadTooLargeError,
  ProxyError,
  ProxyUnreachableError,
  RateLimitedError,
  UnavailableError,
  UnexpectedResponseError,
  UpstreamError,
  type BudgetDetails,
  type ErrorCode,
} from "./errors.js";
export { verifyWebhook, WebhookVerificationError, type WebhookHeaders } from "./webhooks.js";
export {
  WEBHOOK_EVENT_TYPES,
  type BudgetThresholdData,
  type ConnectionApprovedData,
  type ConnectionRevokedData,
  type ConnectionUpdatedData,
  type FundingInvalidData,
  type GrantExhaustedData,
  type WebhookEvent,
  type WebhookEventType,
} from "./webhook-events.js";
