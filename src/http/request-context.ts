import { Elysia } from "elysia";
import { ApiError } from "../errors";

/**
 * Per-request basics that every route shares: an `x-request-id` on every response (also
 * errors, since the error handler keeps `set.headers`), and 413 for bodies whose declared
 * length exceeds the limit, before anything reads them. Bodies without a length
 * (chunked) are capped by Bun's `maxRequestBodySize`, set to the same limit at listen.
 */
export function requestContext(maxBodyBytes: number) {
  return new Elysia().onRequest(({ request, set }) => {
    set.headers["x-request-id"] = crypto.randomUUID();
    const length = request.headers.get("content-length");
    if (length !== null && Number(length) > maxBodyBytes) {
      throw new ApiError("payload_too_large", `request body exceeds ${maxBodyBytes} bytes`);
    }
  });
}
