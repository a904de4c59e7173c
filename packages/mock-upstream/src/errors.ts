/**
 * OpenRouter's error bodies: `{ error: { code, message, metadata? } }` with `code` the HTTP
 * status as an integer (components.schemas.*ResponseErrorData; OpenRouter's error docs:
 * "the HTTP Response will have the same status code as error.code").
 * Messages are the spec's examples for POST /chat/completions unless noted.
 */

interface ErrorTemplate {
  message: string;
  metadata?: Record<string, unknown>;
}

const TEMPLATES: Record<number, ErrorTemplate> = {
  400: { message: "Invalid request parameters" },
  401: { message: "Missing Authentication header" },
  402: { message: "Insufficient credits. Add more using https://openrouter.ai/credits" },
  // What OpenRouter says when a key's own spending limit is reached.
  403: { message: "Key limit exceeded" },
  404: { message: "Resource not found" },
  408: { message: "Operation timed out. Please try again later." },
  413: { message: "Request payload too large" },
  422: { message: "Invalid argument" },
  429: {
    message: "Rate limit exceeded",
    metadata: { provider_name: "Mock", raw: "mock/upstream is temporarily rate-limited upstream" },
  },
  500: { message: "Internal Server Error" },
  502: { message: "Provider returned error", metadata: { provider_name: "Mock", raw: "mock provider failed" } },
  503: { message: "Service temporarily unavailable" },
  524: { message: "Request timed out. Please try again later." },
  529: { message: "Provider returned error", metadata: { provider_name: "Mock", raw: "mock provider overloaded" } },
};

export function errorBody(status: number, message?: string, metadata?: Record<string, unknown>): string {
  const template = TEMPLATES[status];
  const error: { code: number; message: string; metadata?: Record<string, unknown> } = {
    code: status,
    message: message ?? template?.message ?? `Mock upstream error ${status}`,
  };
  const meta = metadata ?? template?.metadata;
  if (meta) error.metadata = meta;
  return JSON.stringify({ error });
}

/** An error response; `status` is the HTTP status unless given separately (`error_200`). */
export function errorResponse(status: number, headers: Headers, options: { message?: string; httpStatus?: number } = {}): Response {
  headers.set("content-type", "application/json");
  return new Response(errorBody(status, options.message), { status: options.httpStatus ?? status, headers });
}

/** A JSON error answer outside chat (no rate-limit headers): the key, auth and generation endpoints. */
export function jsonError(status: number, message?: string): Response {
  return new Response(errorBody(status, message), { status, headers: { "content-type": "application/json" } });
}

/** A JSON 200 answer. */
export function jsonOk(body: unknown): Response {
  return new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } });
}
