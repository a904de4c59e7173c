/**
 * Moves the headers hooks and guards put on `set.headers` (x-request-id, RateLimit-*, CORS)
 * into a Response the route built itself, and empties `set.headers`.
 *
 * Why: Elysia rebuilds every returned Response when `set.headers` holds anything (a new
 * Headers copied from the Response's, then a second Response around the same body), which
 * was a few per cent of a chat call's CPU (ARCHITECTURE.md §7 "Headers handed over"). With
 * `set.headers` empty it returns the Response as it is. A header the Response already has
 * wins, as it does in Elysia's own merge. Call it last, once nothing can throw: the error
 * handler answers with `set.headers`, so they must still be there if the route fails.
 */
export function handOverHeaders(response: Response, headers: Record<string, unknown>): Response {
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined && !response.headers.has(name)) response.headers.set(name, String(value));
    delete headers[name];
  }
  return response;
}
