import { ApiError } from "../errors";
import type { RequestContext } from "../request/context";
import { refuseBody } from "./body-limit";
import { jsonBoundExceeded } from "./json-bounds";

/**
 * Request bodies are JSON, parsed only within the bounds of json-bounds.ts, so no body can
 * make the validation and what follows it recurse out of the stack or block the event loop
 * for long (ARCHITECTURE.md §3 "Security").
 *
 * Where: Elysia parses an `application/json` body with `request.json()` after every parse
 * hook, and the auth macros authenticate in their parse hooks, so, as body-limit.ts does,
 * this replaces the body readers of this one request and leaves the reading to Elysia:
 * strangers' bodies are still never read. The text comes from `request.text()`, which is
 * body-limit.ts's bounded reader when the body declared no length, so a chunked body is
 * cut at MAX_BODY_BYTES before it is scanned.
 *
 * Form bodies are refused: every route's body is JSON (openapi.json says so), and Elysia's
 * multipart parser would build what no scan has bounded: it JSON-parses field values that
 * start with `[` or `{` and nests an object level per `.` in a field name (measured: a
 * field of 10^5 `[` then `]` answered 500). It calls `request.formData()` for
 * `multipart/form-data` and `request.text()` for `application/x-www-form-urlencoded`,
 * deciding by `mediaType`: the content-type up to its `;`, as Elysia hands it to parse hooks.
 */
export function boundJsonBody(request: Request, mediaType: string, context: RequestContext): void {
  if (request.body === null) return;
  const readText = request.text;
  define(request, "json", async () => {
    // The WHATWG "parse JSON from bytes" that request.json() runs is JSON.parse of what
    // text() decodes: UTF-8, BOM dropped, invalid bytes replaced (checked against Bun's).
    const text = await readText.call(request);
    const exceeded = jsonBoundExceeded(text);
    if (exceeded !== null) throw refuseBody(context, new ApiError("invalid_request", exceeded));
    try {
      return JSON.parse(text) as unknown;
    } catch (err) {
      throw refuseBody(context, new ApiError("invalid_request", `request body is not valid JSON: ${parseProblem(err)}`));
    }
  });
  if (mediaType === "multipart/form-data") {
    define(request, "formData", async () => {
      throw refuseBody(context, notJson(mediaType));
    });
  } else if (mediaType === "application/x-www-form-urlencoded") {
    define(request, "text", async () => {
      throw refuseBody(context, notJson(mediaType));
    });
  }
}

/**
 * What JSON.parse said, without the quoted text it may quote from the body ("Unexpected
 * identifier "sk_live_…"": a secret typed without quotes must not come back in an error).
 */
function parseProblem(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.replace(/^JSON Parse error: /, "").replace(/\s*"[^"]*"/g, "") || "it does not parse";
}

function define(request: Request, method: "json" | "formData" | "text", value: () => Promise<unknown>): void {
  Object.defineProperty(request, method, { configurable: true, value });
}

function notJson(mediaType: string): ApiError {
  return new ApiError("invalid_request", `request body must be JSON (content-type application/json), not ${mediaType}`);
}
