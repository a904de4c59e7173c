import { upstreamRequestHeaders } from "./headers";

/** The one way out to the upstream: `fetch` in production, the mock's handler in demo mode. */
export type FetchUpstream = (url: string, init: RequestInit) => Promise<Response>;

/** The upstream did not answer with headers in time, or could not be reached. */
export class UpstreamUnreachable extends Error {}

/**
 * Calls the OpenRouter-compatible upstream. Bun's fetch keeps connections alive and
 * reuses them; its concurrency cap is raised by BUN_CONFIG_MAX_HTTP_REQUESTS, set by
 * src/index.ts before the first fetch.
 */
export class UpstreamClient {
  constructor(
    private readonly fetchUpstream: FetchUpstream,
    private readonly baseUrl: string,
    private readonly apiKey: string,
    private readonly headersTimeoutMs: number,
  ) {}

  get(path: string): Promise<Response> {
    return this.fetchUpstream(this.baseUrl + path, {
      headers: { authorization: `Bearer ${this.apiKey}`, accept: "application/json" },
      signal: AbortSignal.timeout(this.headersTimeoutMs),
    });
  }

  /**
   * POSTs a chat completion. The returned controller aborts the upstream request; the
   * caller uses it when the client is gone for good or the stream stalls. Only the wait
   * for response headers is bounded here: the body's pace is the relay's business.
   */
  async chat(body: string, client: Headers, stream: boolean): Promise<{ response: Response; abort: AbortController }> {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(new UpstreamUnreachable("timed out waiting for the upstream")), this.headersTimeoutMs);
    try {
      const response = await this.fetchUpstream(this.baseUrl + "/chat/completions", {
        method: "POST",
        headers: upstreamRequestHeaders(this.apiKey, client, stream),
        body,
        signal: abort.signal,
      });
      return { response, abort };
    } catch (err) {
      if (err instanceof UpstreamUnreachable) throw err;
      const reason = abort.signal.reason;
      if (reason instanceof UpstreamUnreachable) throw reason;
      throw new UpstreamUnreachable(`could not reach the upstream: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      clearTimeout(timer);
    }
  }
}
