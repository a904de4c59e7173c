/** What the error tests (errors.test.ts, chat-errors.test.ts) expect of the library's typed errors. */
import {
  AuthError,
  BudgetExceededError,
  FundingInvalidError,
  GrantInvalidError,
  IdempotencyConflictError,
  IdempotencyMismatchError,
  InternalError,
  InvalidRequestError,
  NotConnectedError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitedError,
  UnavailableError,
  UpstreamError,
  type ErrorCode,
  type ProxyError,
} from "../../packages/client/src/server";

/** The class each code must be thrown as, written out apart from the library's own table (errors.ts ERROR_CLASSES). */
export const EXPECTED_CLASS: Record<ErrorCode, abstract new (...args: never[]) => ProxyError> = {
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

/** A budget refusal's numbers, as the service sends them inside `error`. */
export const BUDGET = { limitUsd: 5, usedUsd: 4.5, remainingUsd: 0.25, resetsAt: "2026-02-01T00:00:00.000Z" };
