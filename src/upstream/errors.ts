import { ApiError } from "../errors";
import { readError } from "../pricing/usage";

/**
 * Upstream statuses that say the request itself was refused (bad parameters, no model or
 * provider that fits, for instance under the price pin): the client's to fix, so 400, not
 * a 502 that clients retry.
 */
const REQUEST_REFUSED = new Set([400, 404, 413, 422]);

/**
 * Maps an upstream HTTP failure to our error (ARCHITECTURE.md §3 "Errors"): payment refused
 * (402, or OpenRouter's 403 "Key limit exceeded") is `funding_invalid`; a refused request
 * is 400 `invalid_request` with the upstream's message; anything else is 502 `upstream`
 * with the upstream's status and message kept.
 */
export function upstreamFailure(status: number, bodyText: string): ApiError {
  let message = bodyText.slice(0, 500);
  try {
    message = readError(JSON.parse(bodyText))?.message ?? message;
  } catch {
    // Not JSON: keep the (truncated) text.
  }
  if (status === 402 || (status === 403 && /key limit/i.test(message))) {
    return new ApiError("funding_invalid", `the upstream refused payment (HTTP ${status}): ${message}`);
  }
  if (REQUEST_REFUSED.has(status)) {
    return new ApiError("invalid_request", `the upstream refused the request (HTTP ${status}): ${message || "no message"}`);
  }
  return new ApiError("upstream", `upstream error (HTTP ${status}): ${message || "no message"}`);
}
