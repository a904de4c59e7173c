/**
 * Reads the service's error envelope, `{"error": {"code", "message", ...details}}`
 * (ARCHITECTURE.md §3 "Errors"), into the typed errors of errors.ts: from a fetch Response,
 * from the answer the `openai` client of `chat()` received (chat.ts), or from an error an
 * `openai` client threw for an answer of ours (toProxyError).
 */
import { ERROR_CLASSES, ProxyError, UnexpectedResponseError, type ErrorCode } from "./errors.js";

/** What both a fetch Response and the openai SDK's APIError offer for headers. */
interface HeaderReader {
  get(name: string): string | null;
}

/** The typed error for an error answer (status ≥ 400) whose body was `body` (parsed JSON, or null). */
export function errorFromAnswer(status: number, body: unknown, headers: HeaderReader, rawBody: string): ProxyError | UnexpectedResponseError {
  const requestId = headers.get("x-request-id");
  const error = isRecord(body) && isRecord(body.error) ? body.error : null;
  const code = error?.code;
  if (!error || !isKnownCode(code)) return new UnexpectedResponseError(status, requestId, rawBody.slice(0, 200));
  const { code: _code, message, ...details } = error;
  return new ERROR_CLASSES[code]({
    status,
    message: typeof message === "string" ? message : code,
    requestId,
    details,
    retryAfter: retryAfterSeconds(headers.get("retry-after")),
  });
}

/** Reads a failed fetch Response's body and returns its typed error. */
export async function errorFromResponse(response: Response): Promise<ProxyError | UnexpectedResponseError> {
  const text = await response.text();
  return errorFromAnswer(response.status, parseJson(text), response.headers, text);
}

/**
 * The typed error behind an error a chat call threw, or null when it is not an answer of
 * ours (a connection error, a timeout, an abort, anything else). The client of `chat()`
 * already throws ours, so this is for three other cases:
 * - an error that is ours: returned as it is (code written for 0.1, which converted every
 *   chat error, keeps working);
 * - the SDK's `.stream()` helper, which wraps any error that is not the SDK's own in its
 *   OpenAIError with ours as `cause`: ours is returned;
 * - an `openai` client the app built itself (or LangChain's): the SDK's APIError for an
 *   answer of ours becomes ours. Recognised by shape, not `instanceof`, so any copy of
 *   `openai` works: it has the HTTP `status`, the response `headers`, and in `error` the
 *   body's `error` object, which is our envelope's inside.
 */
export function toProxyError(err: unknown): ProxyError | null {
  if (err instanceof ProxyError) return err;
  if (isRecord(err) && err.cause instanceof ProxyError) return err.cause;
  if (!isRecord(err) || typeof err.status !== "number" || !isRecord(err.error) || !isHeaderReader(err.headers)) return null;
  const converted = errorFromAnswer(err.status, { error: err.error }, err.headers, "");
  return converted instanceof UnexpectedResponseError ? null : converted;
}

/** Retry-After (RFC 9110 §10.2.3): delay-seconds, or an HTTP-date turned into seconds from now. */
function retryAfterSeconds(value: string | null): number | null {
  if (value === null) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

function isKnownCode(code: unknown): code is ErrorCode {
  return typeof code === "string" && Object.hasOwn(ERROR_CLASSES, code);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

function isHeaderReader(value: unknown): value is HeaderReader {
  return isRecord(value) && typeof value.get === "function";
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
