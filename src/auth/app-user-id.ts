import { ApiError } from "../errors";

/**
 * An app's id for one of its users, checked by one rule wherever it enters: POST /sessions
 * (`appUserId`), the session token's subject (and so /connections), the chat routes'
 * `x-service-user` header, and the backend's reads (/status, /usage).
 *
 * The rule: 1 to APP_USER_ID_MAX_BYTES bytes of UTF-8, well-formed (no lone surrogate, which
 * has no UTF-8 form), no control characters (they have no place in a log line or a header,
 * and PostgreSQL's text refuses NUL). The bound is in bytes, the unit the id is stored, keyed
 * (Redis keys, index entries) and sent in.
 */
export const APP_USER_ID_MAX_BYTES = 256;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
/** What an HTTP header value may carry as it is: visible ASCII and the space (RFC 9110 §5.5, less obs-text). */
const HEADER_SAFE = /^[\x20-\x7e]*$/;

/** Why `id` is not an app's user id, or null when it is one. */
export function appUserIdProblem(id: string): string | null {
  if (id.length === 0) return "must not be empty";
  // Each UTF-16 unit is 1 to 3 bytes of UTF-8 (a pair, 4): only some lengths need counting.
  if (id.length > APP_USER_ID_MAX_BYTES || (id.length * 3 > APP_USER_ID_MAX_BYTES && Buffer.byteLength(id, "utf8") > APP_USER_ID_MAX_BYTES)) {
    return `must be at most ${APP_USER_ID_MAX_BYTES} bytes of UTF-8`;
  }
  if (LONE_SURROGATE.test(id)) return "must be valid Unicode (it has a lone surrogate, which has no UTF-8 form)";
  if (CONTROL.test(id)) return "must not contain control characters";
  return null;
}

/** `id` when it is an app's user id; else 400 `invalid_request` naming `field` (e.g. `body.appUserId`). */
export function checkAppUserId(id: string, field: string): string {
  const problem = appUserIdProblem(id);
  if (problem !== null) throw new ApiError("invalid_request", `${field}: ${problem}`);
  return id;
}

/**
 * The id an `x-service-user` header carries. Header values are bytes, and what clients send
 * for characters outside ASCII differs (fetch refuses most of them, others send Latin-1 or
 * raw UTF-8, which servers read back as Latin-1), so the id travels percent-encoded: its
 * UTF-8 bytes, `%XX` for each that is not safe (RFC 3986 §2.1; `encodeURIComponent` does
 * it). Every `%` is an escape, so an id that contains `%` is sent as `%25`; an id of visible
 * ASCII without `%` reads the same sent as it is. Throws 400 naming the header otherwise.
 */
export function appUserIdFromHeader(value: string): string {
  const refuse = (problem: string) => new ApiError("invalid_request", `x-service-user: ${problem}`);
  if (!HEADER_SAFE.test(value)) throw refuse("must be ASCII: send the id's UTF-8 bytes percent-encoded (encodeURIComponent)");
  let id = value;
  if (value.includes("%")) {
    try {
      id = decodeURIComponent(value);
    } catch {
      throw refuse("is not well-formed percent-encoded UTF-8 (a `%` in the id itself is sent as %25)");
    }
  }
  return checkAppUserId(id, "x-service-user");
}
