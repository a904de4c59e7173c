/**
 * One error type, one envelope, one status table (ARCHITECTURE.md §3 "Errors").
 * Every failure the service reports goes through ApiError so that clients only ever
 * see `{ "error": { "code", "message", ...details } }` with the status from ERROR_STATUS.
 */
export const ERROR_STATUS = {
  invalid_request: 400,
  auth: 401,
  not_connected: 402,
  budget_exceeded: 402,
  grant_invalid: 402,
  funding_invalid: 402,
  not_found: 404,
  /** The Idempotency-Key's call is still running, or done but its answer was not kept. */
  idempotency_conflict: 409,
  payload_too_large: 413,
  /** The Idempotency-Key was used for a different request (draft-ietf-httpapi-idempotency-key-header §2.7). */
  idempotency_mismatch: 422,
  rate_limited: 429,
  internal: 500,
  upstream: 502,
  unavailable: 503,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** Every code, in the table's order: openapi.json publishes them as the one error schema's enum. */
export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

/** The codes answered with this HTTP status, e.g. 402 → not_connected, budget_exceeded, … */
export function codesWithStatus(status: number): ErrorCode[] {
  return ERROR_CODES.filter((code) => ERROR_STATUS[code] === status);
}

/** What a budget refusal (402) carries inside `error`, besides code and message. */
export interface BudgetErrorDetails {
  limitUsd: number;
  usedUsd: number;
  remainingUsd: number;
  /** ISO 8601: when the period's usage resets. */
  resetsAt: string;
}

/** Extra machine-readable fields placed inside `error` (e.g. budget numbers). */
export type ErrorDetails = Record<string, string | number | boolean | null>;

export class ApiError extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: ErrorDetails = {},
    /** Headers the response must carry, e.g. Retry-After on 429. */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "ApiError";
    this.status = ERROR_STATUS[code];
  }

  toBody(): ErrorEnvelope {
    return { error: { ...this.details, code: this.code, message: this.message } };
  }
}

export interface ErrorEnvelope {
  error: { code: ErrorCode; message: string } & ErrorDetails;
}

/** The response body for an error, ready for JSON serialisation. */
export function errorBody(code: ErrorCode, message: string, details: ErrorDetails = {}): ErrorEnvelope {
  return new ApiError(code, message, details).toBody();
}
