import { ApiError } from "../errors";
import type { UpstreamPayer } from "../budget/target";
import { readError } from "../pricing/usage";

/**
 * Upstream statuses that say the request itself was refused (bad parameters, no model or
 * provider that fits, for instance under the price pin): the client's to fix, so 400, not
 * a 502 that clients retry.
 */
const REQUEST_REFUSED = new Set([400, 404, 413, 422]);

/** An upstream HTTP failure as the chat service acts on it. */
export interface UpstreamFailure {
  /** What the client is answered. */
  error: ApiError;
  /** The upstream refused the key that pays the call (see `refusesKey`), not the request. */
  keyRefused: boolean;
  /**
   * The user's own key was refused this request's cost alone (see `refusesRequestCost`): a
   * budget refusal (`error` is `budget_exceeded`, its figures left to the caller, which has
   * the budget), and no connection is marked.
   */
  costRefused: boolean;
}

/**
 * Whether a 402 refuses only this request's cost, not the key. OpenRouter checks a request's
 * worst case (its prompt, and `max_tokens` at the completion price) against what is left on
 * the key before any provider is asked; when something is left, but not enough, it answers
 * 402 "This request requires more credits, or fewer max_tokens. You requested up to N
 * tokens, but can only afford M." With M above 0 a smaller `max_tokens` is paid by the same
 * key: the clamp sent was too generous for it, the key is fine. With M at 0 the key cannot
 * pay for even a minimal completion, and (as for a key with nothing left, the spec's own 402
 * "Insufficient credits or quota to complete request", its example "Insufficient credits. Add
 * more using https://openrouter.ai/credits") it is the key's credit that is short.
 */
export function refusesRequestCost(status: number, message: string): boolean {
  const affordable = /can only afford (\d+)/i.exec(message);
  return status === 402 && affordable !== null && Number(affordable[1]) > 0;
}

/**
 * Whether the upstream refused the key itself (spec/openrouter-openapi.yaml, POST
 * /chat/completions): 401 "invalid credentials", 402 "insufficient credits or quota", or a
 * 403 that says the key's own spending limit is reached (OpenRouter's "Key limit exceeded").
 * Any other 403 is a guardrail or moderation refusing the content: a fault of this request,
 * not of the key.
 */
export function refusesKey(status: number, message: string): boolean {
  return status === 401 || status === 402 || (status === 403 && /key limit/i.test(message));
}

/**
 * Maps an upstream HTTP failure to our error (ARCHITECTURE.md §3 "Errors"). A refused key is
 * its payer's problem: the user's own key is 402 `funding_invalid` (the user reconnects),
 * unless only this request's cost was refused (402 `budget_exceeded`, nothing marked);
 * the operator's key is 502 `upstream` naming the operator as the one to act, since no
 * user can fix it (and a retry cannot either). A refused request is 400 `invalid_request`
 * with the upstream's message; anything else is 502 `upstream` with the upstream's status
 * and message kept.
 */
export function upstreamFailure(status: number, bodyText: string, payer: UpstreamPayer): UpstreamFailure {
  let message = bodyText.slice(0, 500);
  try {
    message = readError(JSON.parse(bodyText))?.message ?? message;
  } catch {
    // Not JSON: keep the (truncated) text.
  }
  // The user's key has credit left, only less than the max_tokens the budget let through:
  // the clamp was too generous for the key, the key is fine. (On the operator's key it is
  // still the operator's credit that is short: a refusal of that key, below.)
  if (payer === "user" && refusesRequestCost(status, message)) {
    const error = new ApiError(
      "budget_exceeded",
      `the user's own upstream key has less credit left than this request's max_tokens could cost (HTTP ${status}: ${message}). ` +
        "Send a smaller max_tokens; the key's monthly limit is raised by linking the account again",
    );
    return { error, keyRefused: false, costRefused: true };
  }
  if (refusesKey(status, message)) {
    const said = `HTTP ${status}: ${message || "no message"}`;
    const error =
      payer === "user"
        ? new ApiError("funding_invalid", `the upstream refused the user's own key (${said}); the user must reconnect`)
        : new ApiError(
            "upstream",
            `the service's upstream key was refused (${said}): the operator must fix its credit or key; no user's budget or connection is affected`,
            {},
            { "x-should-retry": "false" },
          );
    return { error, keyRefused: true, costRefused: false };
  }
  if (REQUEST_REFUSED.has(status)) {
    return {
      error: new ApiError("invalid_request", `the upstream refused the request (HTTP ${status}): ${message || "no message"}`),
      keyRefused: false,
      costRefused: false,
    };
  }
  return { error: new ApiError("upstream", `upstream error (HTTP ${status}): ${message || "no message"}`), keyRefused: false, costRefused: false };
}
