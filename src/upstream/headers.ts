/**
 * Header hygiene between client and upstream. Both directions use allow-lists: nothing the
 * client sends reaches the upstream unless listed (so the client's Authorization, cookies
 * and hop-by-hop headers never do), and nothing the upstream sends reaches the client
 * unless listed (no upstream cookies, no Connection/Transfer-Encoding/Keep-Alive, which
 * RFC 9110 §7.6.1 says a proxy must not forward).
 */

/** Client headers passed upstream: OpenRouter's app attribution (its docs, "App Attribution"). */
const CLIENT_TO_UPSTREAM = ["http-referer", "x-title"] as const;

/**
 * Upstream headers passed back: the generation id. Not the upstream's `x-ratelimit-*`: they
 * tell the operator's key's quota, not the app's, and would contradict the proxy's own
 * `RateLimit-*` (src/ratelimit/enforcement.ts), which are the limits an app is held to.
 */
const UPSTREAM_TO_CLIENT = ["x-generation-id"] as const;

/**
 * A client's `x-request-id` is kept when it is 1–128 visible characters of a safe set
 * (letters, digits, `-_.:`): echoed as `x-client-request-id`, logged, and sent upstream.
 * It never replaces our own `x-request-id`, which is the ledger row's primary key and must
 * be unique whatever a client sends.
 */
export function clientRequestId(headers: Headers): string | undefined {
  const value = headers.get("x-request-id");
  return value !== null && /^[A-Za-z0-9._:-]{1,128}$/.test(value) ? value : undefined;
}

export function upstreamRequestHeaders(apiKey: string, client: Headers, stream: boolean): Record<string, string> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${apiKey}`,
    "content-type": "application/json",
    accept: stream ? "text/event-stream" : "application/json",
  };
  for (const name of CLIENT_TO_UPSTREAM) {
    const value = client.get(name);
    if (value !== null) headers[name] = value;
  }
  // The client's own request id, when valid, travels on so the three logs line up.
  const requestId = clientRequestId(client);
  if (requestId) headers["x-request-id"] = requestId;
  return headers;
}

/** Copies the allowed upstream headers into `out`. */
export function copyUpstreamResponseHeaders(upstream: Headers, out: Record<string, string>): void {
  for (const name of UPSTREAM_TO_CLIENT) {
    const value = upstream.get(name);
    if (value !== null) out[name] = value;
  }
}
