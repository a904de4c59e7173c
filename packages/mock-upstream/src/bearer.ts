/**
 * The bearer key every authenticated endpoint requires, and whose it is (./keys.ts). The
 * messages of a missing and a malformed header are what the mock always said; an unknown,
 * deleted, disabled or expired key is refused the same way, 401.
 */
import type { KeyBook, KeyLookup } from "./keys";

/** A bearer key, as OpenRouter requires on every authenticated endpoint. */
export const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** The request's key and account, or a 401 and its message (undefined: the spec's default message). */
export function authenticate(request: Request, keys: KeyBook, now: number): KeyLookup | { status: 401; message: string | undefined } {
  const header = request.headers.get("authorization");
  if (header === null) return { status: 401, message: undefined };
  const match = BEARER.exec(header);
  if (!match) return { status: 401, message: "Invalid Authorization header" };
  return keys.lookup(match[1]!, now);
}
