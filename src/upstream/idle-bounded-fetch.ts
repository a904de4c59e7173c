import type { FetchUpstream } from "./client";

/**
 * Upstream requests through a connection pool of their own (a `Bun.FetchSession`), whose idle
 * connections are reused for less than `maxIdleMs` (UPSTREAM_IDLE_REUSE_MS).
 *
 * Why: an upstream closes a keep-alive connection left idle past its own timeout (Node's
 * default is 5 s). Bun's fetch drops a pooled connection once it has seen that close, but a
 * request written onto it while the close is on its way is lost: the connection resets
 * before any answer, and Bun does not send a POST again (nor may the proxy: it cannot know
 * the upstream did not read it). The upstream never had the call, yet a call cut before its
 * answer is charged its reservation, since it may have been billed (issue 56: one was, just
 * after a store outage had left every connection idle).
 *
 * How: before a request, when the pool was last emptied `maxIdleMs` ago or more, its idle
 * connections are closed (`FetchSession.close()`: those in use finish) and the request opens
 * a fresh one. A connection reused later was released after that emptying, less than
 * `maxIdleMs` ago, so it has been idle for less than that. The pool is emptied only when a
 * request comes, so an idle proxy does nothing. Bun's own idle limit for pooled connections
 * (`keepAlive.idleTimeout`) counts in steps of 4 s and may keep one two steps longer: too
 * coarse to stay under a 5 s keep-alive.
 */
export function idleBoundedFetch(maxIdleMs: number, now: () => number = () => performance.now()): FetchUpstream {
  const session = new Bun.FetchSession();
  let emptiedAt = -Infinity;
  return (url, init) => {
    const at = now();
    if (at - emptiedAt >= maxIdleMs) {
      session.close();
      emptiedAt = at;
    }
    return session.fetch(url, init);
  };
}
