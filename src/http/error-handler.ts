import { Elysia, type ValidationError } from "elysia";
import type { ValueError } from "@sinclair/typebox/errors";
import { ApiError, type ErrorCode } from "../errors";
import type { Logger } from "../logger";
import { requestContextSlot } from "../request/elysia";
import { SealedSecretError } from "../secrets/secret-box";

/**
 * Maps every failure to the one envelope (ARCHITECTURE.md §3 "Errors"): our ApiErrors as they
 * are, Elysia's parse/validation/not-found errors to 400/404, an answer that fails its own
 * response schema to 502 (logged), anything else to a generic 500 logged once with the
 * request id. Registered globally so it covers every plugin.
 */
export function errorHandler(logger: Logger) {
  return new Elysia().use(requestContextSlot).onError({ as: "global" }, ({ code, error, set, request, requestContext }) => {
    // A body refused while it was read is the answer, whatever error followed (Elysia's
    // multipart parser, its refusal swallowed for an optional body, fails with its own).
    const apiError = requestContext.bodyRefusal ?? toApiError(code, error);
    requestContext.log.errorCode = apiError.code;
    const where = { requestId: requestContext.requestId, method: request.method, path: new URL(request.url).pathname };
    const sealed = sealedSecretError(error);
    if (sealed) {
      // A secret the request needs (a user's own upstream key, say) does not open: the
      // operator's to fix (the secrets key, or the row), said once with its reason, never the secret.
      logger.error("a sealed secret could not be opened", { ...where, secret: sealed.context, reason: sealed.reason, sealedKeyId: sealed.sealedKeyId });
    } else if (apiError.code === "internal") {
      logger.error("unhandled error", { ...where, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    } else if (failedResponseSchema(code, error)) {
      // The field and what it failed, never the value (an answer can hold a token).
      logger.error("an answer failed its response schema", { ...where, error: apiError.message });
    }
    set.status = apiError.status;
    Object.assign(set.headers, apiError.headers);
    set.headers["content-type"] = "application/json";
    // Serialised here so Elysia's response-schema check does not touch error bodies.
    return new Response(JSON.stringify(apiError.toBody()), { status: apiError.status, headers: set.headers as Record<string, string> });
  });
}

/** The SealedSecretError a request failed with, as thrown or as the cause Elysia wrapped it in. */
function sealedSecretError(error: unknown): SealedSecretError | null {
  if (error instanceof SealedSecretError) return error;
  const cause = (error as { cause?: unknown })?.cause;
  return cause instanceof SealedSecretError ? cause : null;
}

function toApiError(code: string | number, error: unknown): ApiError {
  // An ApiError thrown inside a parse hook (auth runs there) arrives wrapped.
  const cause = (error as { cause?: unknown })?.cause;
  if (error instanceof ApiError) return error;
  if (cause instanceof ApiError) return cause;
  // What the proxy was to answer, not what the client sent: the numbers in an answer come
  // from the upstream (its catalogue, its usage), so it is the upstream's error, not the
  // client's (a 400 would tell the client to change a request that was fine).
  if (failedResponseSchema(code, error)) {
    return new ApiError("upstream", `the proxy could not validate its answer (${describeValidation(error as ValidationError)}); the request was not at fault`);
  }
  switch (code) {
    case "VALIDATION":
      return new ApiError("invalid_request", describeValidation(error as ValidationError));
    case "PARSE":
      return new ApiError("invalid_request", "request body is not valid for its content-type");
    case "NOT_FOUND":
      return new ApiError("not_found", "no such endpoint");
    case "INVALID_COOKIE_SIGNATURE":
      return new ApiError("invalid_request", "invalid cookie");
    default:
      return new ApiError("internal" satisfies ErrorCode, "internal error");
  }
}

const failedResponseSchema = (code: string | number, error: unknown) => code === "VALIDATION" && (error as ValidationError).type === "response";

/** "body.requestLimit.monthlyUsd: Expected number greater than 0" — names the bad field. */
function describeValidation(error: ValidationError): string {
  return describeValueError(error.type ?? "request", error.valueError);
}

/** The message for the first error TypeBox found in `where` (body, query, ...); also body-shape.ts's. */
export function describeValueError(where: string, first: ValueError | undefined): string {
  if (!first) return `invalid ${where}`;
  const field = first.path.replace(/^\//, "").replaceAll("/", ".");
  const message = first.value === undefined ? "is required" : first.message;
  return `${where}${field ? "." + field : ""}: ${message}`;
}
