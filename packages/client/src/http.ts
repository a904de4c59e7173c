/**
 * JSON calls to the service's API under `/api/v1`, with one credential as the bearer
 * (README "API at a glance"). A non-2xx answer throws its typed error (envelope.ts).
 */
import { errorFromResponse } from "./envelope.js";

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
  const response = await target.fetch(url.toString(), {
    method,
    headers,
    body: request.body === undefined ? undefined : JSON.stringify(request.body),
  });
  if (!response.ok) throw await errorFromResponse(response);
  return (await response.json()) as T;
}
