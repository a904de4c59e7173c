/**
 * JSON calls to the service's API under `/api/v1`, with one credential as the bearer
 * (README "API at a glance"). A non-2xx answer throws its typed error (envelope.ts).
 */
import { errorFromResponse } from "./envelope.js";
import { ProxyUnreachableError } from "./errors.js";

/** The shape of `fetch` the client calls (and hands to the `openai` SDK, whose option has this type). */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export interface ApiTarget {
  /** The API's root, e.g. `http://localhost:8787/api/v1`. */
  apiBase: string;
  /** A secret key (server) or a session token (browser). */
  bearer: string;
  fetch: FetchLike;
}

export interface JsonRequest {
  query?: Record<string, string | number | undefined>;
  body?: unknown;
}

/** `http://host:8787/` (or with a path prefix) → `http://host:8787/api/v1`: the API's root under the service's base URL. */
export function apiBaseOf(baseUrl: string): string {
  const url = new URL(baseUrl);
  if (url.search || url.hash) throw new TypeError(`baseUrl must be the service's address without a query or fragment, not ${baseUrl}`);
  return `${url.origin}${url.pathname.replace(/\/+$/, "")}/api/v1`;
}

export async function requestJson<T>(target: ApiTarget, method: "GET" | "POST", path: string, request: JsonRequest = {}): Promise<T> {
  const url = new URL(target.apiBase + path);
  for (const [name, value] of Object.entries(request.query ?? {})) {
    if (value !== undefined) url.searchParams.set(name, String(value));
  }
  const headers: Record<string, string> = { authorization: `Bearer ${target.bearer}`, accept: "application/json" };
  if (request.body !== undefined) headers["content-type"] = "application/json";
  const response = await reach(target.fetch, url.toString(), {
    method,
    headers,
    body: request.body === undefined ? undefined : JSON.stringify(request.body),
  });
  if (!response.ok) throw await errorFromResponse(response);
  return (await response.json()) as T;
}

const SERVER_HINT = "Is the service running at the baseUrl given to createServerClient?";

/**
 * `send(url, init)`, with a failure to get any answer thrown as ProxyUnreachableError (the
 * address and what to check, not fetch's bare "fetch failed"); an abort or timeout as it was.
 */
export async function reach(send: FetchLike, url: string, init: RequestInit, hint = SERVER_HINT): Promise<Response> {
  try {
    return await send(url, init);
  } catch (err) {
    const name = (err as { name?: unknown } | null)?.name;
    if (name === "AbortError" || name === "TimeoutError") throw err;
    const { origin, pathname } = new URL(url);
    throw new ProxyUnreachableError(origin + pathname, err, hint);
  }
}
