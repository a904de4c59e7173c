/**
 * Errors of a connection that was never made (refused, no route, no socket), as Bun's fetch
 * reports them in `code`: nothing of the request was sent. Anything else may have reached
 * the peer (a reset after sending, a timeout).
 */
const CONNECT_FAILURES = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "ConnectionRefused", "FailedToOpenSocket"]);

export const errorCode = (err: unknown): string => String((err as { code?: unknown } | undefined)?.code ?? "");

export function isConnectFailure(err: unknown): boolean {
  return CONNECT_FAILURES.has(errorCode(err));
}
