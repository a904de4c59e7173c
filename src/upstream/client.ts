import { upstreamRequestHeaders } from "./headers";
import { isConnectFailure } from "../connect-failure";

/** The one way out to the upstream: `fetch` in production, the mock's handler in demo mode. */
export type FetchUpstream = (url: string, init: RequestInit) => Promise<Response>;

/** The upstream could not be reached: the connection was never made, so nothing was sent (and nothing can be billed). */
export class UpstreamUnreachable extends Error {}

/** The request was sent, but it failed before an answer came (a reset, say): the upstream may have started a generation. */
export class UpstreamFailed extends Error {}

/** The upstream refused a PKCE code exchange (a 4xx): the code was unknown, used, expired, or its verifier did not match. */
export class AuthCodeRefused extends Error {
  constructor(
    readonly status: number,
    /** The upstream's own message: it names the code's problem, never a key. */
    readonly upstreamMessage: string,
  ) {
    super(`the upstream refused the authorization code (HTTP ${status}: ${upstreamMessage})`);
  }
}

/**
 * No answer's headers within the wait: the client is answered now, but the request is not
 * given up. The upstream may be generating (and bills a generation to its end whether or not
 * anyone waits: OpenRouter's streaming page, on non-streaming requests), so the caller keeps
 * `pending` to read its usage when it comes, and `abort` to give up at its own bound.
 */
export class UpstreamTimeout extends Error {
  constructor(
    readonly pending: Promise<Response>,
    readonly abort: AbortController,
  ) {
    super("timed out waiting for the upstream's answer");
  }
}

/**
 * Calls the OpenRouter-compatible upstream. Every request goes out through `send`, which
 * never follows a redirect. Bun's fetch keeps connections alive and reuses them (for
 * less than UPSTREAM_IDLE_REUSE_MS once idle: ./idle-bounded-fetch.ts); its concurrency
 * cap is raised by BUN_CONFIG_MAX_HTTP_REQUESTS, set by src/index.ts before the first fetch.
 */
export class UpstreamClient {
  constructor(
    private readonly fetchUpstream: FetchUpstream,
    private readonly baseUrl: string,
    private readonly apiKey: string,
    private readonly headersTimeoutMs: number,
  ) {}

  /**
   * The one way a request leaves for the upstream. A redirect is not followed but answered
   * as it came: a 3xx, which every caller treats as it treats any status that is not 2xx
   * (an upstream error). Followed, it would send the call wherever the redirect pointed
   * and take that place's answer, its usage and its records as the upstream's.
   */
  private send(path: string, init: RequestInit): Promise<Response> {
    return this.fetchUpstream(this.baseUrl + path, { ...init, redirect: "manual" });
  }

  /** A GET with the operator's key, or with `apiKey` (a user's own key, for a call it paid). */
  get(path: string, apiKey: string = this.apiKey): Promise<Response> {
    return this.send(path, {
      headers: { authorization: `Bearer ${apiKey}`, accept: "application/json" },
      signal: AbortSignal.timeout(this.headersTimeoutMs),
    });
  }

  /** The model list (`GET /models`), its entries as listed: what the pricing catalogue reads. */
  async listModels(): Promise<unknown[]> {
    const response = await this.get("/models");
    if (!response.ok) throw new Error(`GET /models answered ${response.status}`);
    const body = (await response.json()) as { data?: unknown };
    return Array.isArray(body.data) ? body.data : [];
  }

  /**
   * Exchanges an OAuth PKCE code for the user's own key (`POST /auth/keys`, S256: the spec's
   * exchange; RFC 7636 §4.5). Sent without the operator's key: the code and its verifier are
   * the credential, and the key created belongs to the user's account. Throws AuthCodeRefused
   * on a 4xx, UpstreamUnreachable or UpstreamFailed when no usable answer came.
   */
  async exchangeAuthCode(code: string, codeVerifier: string): Promise<string> {
    let response: Response;
    try {
      response = await this.send("/auth/keys", {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({ code, code_verifier: codeVerifier, code_challenge_method: "S256" }),
        signal: AbortSignal.timeout(this.headersTimeoutMs),
      });
    } catch (err) {
      const reason = `could not reach the upstream: ${err instanceof Error ? err.message : String(err)}`;
      throw isConnectFailure(err) ? new UpstreamUnreachable(reason) : new UpstreamFailed(reason);
    }
    const body = (await response.json().catch(() => null)) as { key?: unknown; error?: { message?: unknown } } | null;
    if (response.status >= 400 && response.status < 500) {
      throw new AuthCodeRefused(response.status, typeof body?.error?.message === "string" ? body.error.message.slice(0, 200) : "no message");
    }
    if (!response.ok || typeof body?.key !== "string" || body.key === "") {
      throw new UpstreamFailed(`POST /auth/keys answered ${response.status}${response.ok ? " without a key" : ""}`);
    }
    return body.key;
  }

  /**
   * What the upstream says of a key (`GET /key`, spec: "Get current API key"): its credit
   * limit and what the limit leaves, in USD, each null when the key has no limit. Throws
   * when the upstream does not answer it (the caller decides what that means); neither the
   * key nor the upstream's words are in the error.
   */
  async keyInfo(apiKey: string): Promise<{ limitUsd: number | null; remainingUsd: number | null }> {
    const response = await this.get("/key", apiKey);
    if (!response.ok) {
      await response.body?.cancel().catch(() => {});
      throw new Error(`GET /key answered ${response.status}`);
    }
    const data = ((await response.json()) as { data?: { limit?: unknown; limit_remaining?: unknown } } | null)?.data;
    return { limitUsd: usdOrNull(data?.limit), remainingUsd: usdOrNull(data?.limit_remaining) };
  }

  /**
   * POSTs a chat completion, paid by the operator's key, or by `apiKey` (a user's own key,
   * opened for this call: it goes in the Authorization header and nowhere else). The
   * returned controller aborts the upstream request; the caller uses it when the client is
   * gone for good or the stream stalls. Only the wait for response headers is bounded here
   * (UpstreamTimeout, which leaves the request running): the body's pace is the relay's business.
   */
  async chat(body: string, client: Headers, stream: boolean, apiKey: string = this.apiKey): Promise<{ response: Response; abort: AbortController }> {
    const abort = new AbortController();
    const pending = this.send("/chat/completions", {
      method: "POST",
      headers: upstreamRequestHeaders(apiKey, client, stream),
      body,
      signal: abort.signal,
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<"timeout">((resolve) => (timer = setTimeout(resolve, this.headersTimeoutMs, "timeout")));
    try {
      const first = await Promise.race([pending, timedOut]);
      if (first === "timeout") {
        // Kept by the caller, which reads it (or gives up) later; a rejection then is its business.
        pending.catch(() => {});
        throw new UpstreamTimeout(pending, abort);
      }
      return { response: first, abort };
    } catch (err) {
      if (err instanceof UpstreamTimeout) throw err;
      const reason = `could not reach the upstream: ${err instanceof Error ? err.message : String(err)}`;
      throw isConnectFailure(err) ? new UpstreamUnreachable(reason) : new UpstreamFailed(reason);
    } finally {
      clearTimeout(timer);
    }
  }
}

const usdOrNull = (value: unknown): number | null => (typeof value === "number" && Number.isFinite(value) ? value : null);
