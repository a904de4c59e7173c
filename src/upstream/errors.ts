import { ApiError } from "../errors";
import { readError } from "../metering/usage";

/**
 * Maps an upstream HTTP failure to our error (DESIGN.md §3 "Errors"): payment refused
 * (402, or OpenRouter's 403 "Key limit exceeded") is `funding_invalid`; anything else is
 * 502 `upstream` with the upstream's status and message kept.
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
  return new ApiError("upstream", `upstream error (HTTP ${status}): ${message || "no message"}`);
}
