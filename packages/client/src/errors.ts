/**
 * The service's errors as classes: one per code of its code → status table (README "API at
 * a glance", ARCHITECTURE.md §3 "Errors"), all extending ProxyError. The service answers
 * every error with one envelope, `{"error": {"code", "message", ...details}}`, and the code
 * fixes the status, so a program can branch on the class (or on `code`) and never on text.
 * tests/client/openapi-types.test.ts holds ERROR_CODES equal to the served Error schema.
 */

/** Every code the service sends, in its table's order. */
export const ERROR_CODES = [
  "invalid_request",
  "auth",
  "not_connected",
  "budget_exceeded",
  "grant_invalid",
  "funding_invalid",
  "not_found",
  "idempotency_conflict",
  "payload_too_large",
  "idempotency_mismatch",
  "rate_limited",
  "internal",
  "upstream",
  "unavailable",
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** What a spending limit's refusal (402) carries besides code and message. */
export interface BudgetDetails {
  /** The cap, USD. */
  limitUsd: number;
  /** Settled spend in the period, USD. */
  usedUsd: number;
  /** What new requests can still draw on, USD. */
  remainingUsd: number;
  /** ISO 8601: when the period's usage resets. */
  resetsAt: string;
}

/** One error answer as read off the wire (envelope.ts builds it). */
export interface ErrorAnswer {
  status: number;
  message: string;
  /** The response's `x-request-id`; for chat calls it is also the ledger row's `requestId`. */
  requestId: string | null;
  /** The envelope's other fields (the budget numbers, when there are any). */
  details: Record<string, unknown>;
  /** The `Retry-After` header in seconds, when the answer had one. */
  retryAfter: number | null;
}

export abstract class ProxyError extends Error {
  abstract readonly code: ErrorCode;
  /** The HTTP status the service answered. */
  readonly status: number;
  readonly requestId: string | null;

  constructor(answer: ErrorAnswer) {
    super(answer.message);
    this.name = new.target.name;
    this.status = answer.status;
    this.requestId = answer.requestId;
  }
}

/** 400: the request names an unknown model, an unbounded plugin, a bad field, … (the message says which). */
export class InvalidRequestError extends ProxyError {
  readonly code = "invalid_request";
}

/** 401: a missing, revoked or wrong secret key. */
export class AuthError extends ProxyError {
  readonly code = "auth";
}

/** 402: the user has not approved a budget (or revoked it): send them through the connect step. */
export class NotConnectedError extends ProxyError {
  readonly code = "not_connected";
}

/** 402: the user's monthly cap (or the app's daily grant ceiling) does not cover the call. */
export class BudgetExceededError extends ProxyError implements BudgetDetails {
  readonly code = "budget_exceeded";
  readonly limitUsd: number;
  readonly usedUsd: number;
  readonly remainingUsd: number;
  readonly resetsAt: string;

  constructor(answer: ErrorAnswer) {
    super(answer);
    const budget = budgetDetails(answer.details);
    this.limitUsd = budget.limitUsd;
    this.usedUsd = budget.usedUsd;
    this.remainingUsd = budget.remainingUsd;
    this.resetsAt = budget.resetsAt;
  }
}

/** 402: the grant is unknown, expired, revoked, used up or spent. */
export class GrantInvalidError extends ProxyError {
  readonly code = "grant_invalid";
  /** The grant's numbers when its cap is what refused the call; null for the other reasons. */
  readonly budget: BudgetDetails | null;

  constructor(answer: ErrorAnswer) {
    super(answer);
    this.budget = typeof answer.details.limitUsd === "number" ? budgetDetails(answer.details) : null;
  }
}

/** 402: the upstream refused payment for the user's calls; they must approve again. */
export class FundingInvalidError extends ProxyError {
  readonly code = "funding_invalid";
}

export class NotFoundError extends ProxyError {
  readonly code = "not_found";
}

/** 409: a call with the same Idempotency-Key is still running (README "Retries without double charges"). */
export class IdempotencyConflictError extends ProxyError {
  readonly code = "idempotency_conflict";
  /** Seconds to wait before retrying (the `Retry-After` header). */
  readonly retryAfter: number | null;

  constructor(answer: ErrorAnswer) {
    super(answer);
    this.retryAfter = answer.retryAfter;
  }
}

/** 413: the body is larger than the service's MAX_BODY_BYTES. */
export class PayloadTooLargeError extends ProxyError {
  readonly code = "payload_too_large";
}

/** 422: the Idempotency-Key was used for another body, user or grant. */
export class IdempotencyMismatchError extends ProxyError {
  readonly code = "idempotency_mismatch";
}

/** 429: too many calls in the window (README "Configuration", the RL_* variables). */
export class RateLimitedError extends ProxyError {
  readonly code = "rate_limited";
  /** Seconds until the window lets a call through (the `Retry-After` header). */
  readonly retryAfter: number | null;

  constructor(answer: ErrorAnswer) {
    super(answer);
    this.retryAfter = answer.retryAfter;
  }
}

/** 500: the service failed; its log has the request id. */
export class InternalError extends ProxyError {
  readonly code = "internal";
}

/** 502: the upstream failed; nothing was charged. */
export class UpstreamError extends ProxyError {
  readonly code = "upstream";
}

/** 503: a store the budgets need is down; budgets fail closed, so retry later. */
export class UnavailableError extends ProxyError {
  readonly code = "unavailable";
}

/** The class of each code: exhaustive, so a code added to ERROR_CODES needs its class here. */
export const ERROR_CLASSES: { [C in ErrorCode]: new (answer: ErrorAnswer) => ProxyError & { code: C } } = {
  invalid_request: InvalidRequestError,
  auth: AuthError,
  not_connected: NotConnectedError,
  budget_exceeded: BudgetExceededError,
  grant_invalid: GrantInvalidError,
  funding_invalid: FundingInvalidError,
  not_found: NotFoundError,
  idempotency_conflict: IdempotencyConflictError,
  payload_too_large: PayloadTooLargeError,
  idempotency_mismatch: IdempotencyMismatchError,
  rate_limited: RateLimitedError,
  internal: InternalError,
  upstream: UpstreamError,
  unavailable: UnavailableError,
};

/**
 * No answer at all: the service could not be reached (connection refused or reset, a name
 * that does not resolve, TLS; in a browser also a CORS refusal, which a page cannot tell from
 * the others). Not a ProxyError, since the service said nothing; `cause` is what `fetch` threw.
 * An abort or a timeout the caller asked for is rethrown as it is.
 */
export class ProxyUnreachableError extends Error {
  constructor(
    /** What was asked: the address without its query. */
    readonly url: string,
    cause: unknown,
    hint: string,
  ) {
    super(`could not reach the metered proxy at ${url} (${describeCause(cause)}). ${hint}`, { cause });
    this.name = "ProxyUnreachableError";
  }
}

/** fetch's message, with the system's code when it gives one (Node: `fetch failed` caused by ECONNREFUSED). */
function describeCause(cause: unknown): string {
  const err = cause as { message?: unknown; code?: unknown; cause?: { code?: unknown } } | null;
  const message = typeof err?.message === "string" && err.message !== "" ? err.message : String(cause);
  const code = err?.code ?? err?.cause?.code;
  return typeof code === "string" && !message.includes(code) ? `${message}: ${code}` : message;
}

/**
 * An error answer that is not the service's envelope (a proxy or load balancer in front of
 * it answered), or whose code this version of the client does not know.
 */
export class UnexpectedResponseError extends Error {
  constructor(
    readonly status: number,
    readonly requestId: string | null,
    /** The start of the body, for the log. */
    readonly bodyStart: string,
  ) {
    super(`the metered proxy answered ${status} without an error this client knows: ${bodyStart}`);
    this.name = "UnexpectedResponseError";
  }
}

function budgetDetails(details: Record<string, unknown>): BudgetDetails {
  const usd = (key: keyof BudgetDetails) => (typeof details[key] === "number" ? details[key] : Number.NaN);
  return {
    limitUsd: usd("limitUsd"),
    usedUsd: usd("usedUsd"),
    remainingUsd: usd("remainingUsd"),
    resetsAt: typeof details.resetsAt === "string" ? details.resetsAt : "",
  };
}
