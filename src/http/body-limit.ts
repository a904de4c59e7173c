import { ApiError } from "../errors";

/**
 * MAX_BODY_BYTES for bodies sent without a Content-Length (chunked, RFC 9112 §7.1).
 *
 * A declared length over the limit is refused in request-context.ts before anything is
 * read. A chunked body declares nothing, and Bun's own `maxRequestBodySize` answers a bare
 * 413 without our envelope (measured on Bun 1.4.5: "HTTP/1.1 413 Payload Too Large",
 * empty body, connection closed), so it is only the outer bound. Here the body is read
 * with a running byte count instead, and the read stops at the first chunk past the limit:
 * the rest is never pulled from the socket.
 *
 * Elysia parses bodies with `request.json()` (or text/arrayBuffer/formData by
 * content-type) after every parse hook, and the auth macros authenticate in their parse
 * hooks. So this cannot read the body itself (it runs first, before auth: strangers'
 * bodies would be read). It replaces the body-reading methods of this one request with
 * bounded ones instead; they run when Elysia's parser calls them, after auth. The request
 * object stays the same one, which `server.timeout(request)`, `server.requestIP(request)`
 * and the auth macro's per-request memo rely on.
 */
const BODY_READERS = ["json", "text", "arrayBuffer", "formData", "blob", "bytes"] as const;

/** Requests whose body a reader refused, with why (see `throwIfBodyRefused`). */
const refusedBodies = new WeakMap<Request, ApiError>();

/** Remembers that `request`'s body was refused, and returns the error for the reader to throw. */
export function refuseBody(request: Request, error: ApiError): ApiError {
  refusedBodies.set(request, error);
  return error;
}

export function limitUndeclaredBody(request: Request, maxBytes: number): void {
  if (request.headers.has("content-length") || request.body === null) return;
  const body = request.body;
  const contentType = request.headers.get("content-type") ?? "";
  let bytes: Promise<Uint8Array> | undefined;
  const readOnce = async () =>
    (bytes ??= readWithin(body, maxBytes).catch((err) => {
      throw err instanceof ApiError ? refuseBody(request, err) : err;
    }));
  for (const method of BODY_READERS) {
    Object.defineProperty(request, method, {
      configurable: true,
      // Parsing is left to a Response over the same bytes, so it is exactly Bun's.
      value: async () => new Response(await readOnce(), { headers: { "content-type": contentType } })[method](),
    });
  }
}

/**
 * Elysia swallows parse errors of optional bodies (POST /connections), which would turn
 * a refused body (413 here, 400 in json-body.ts) into "no body". Called after parsing, so
 * the refusal stands either way.
 */
export function throwIfBodyRefused(request: Request): void {
  const refusal = refusedBodies.get(request);
  if (refusal) throw refusal;
}

/**
 * Why `request`'s body was refused, if it was: the error handler answers with it whatever
 * error followed (Elysia's multipart parser, its refusal swallowed for an optional body,
 * fails on the missing form with a ParseError of its own).
 */
export function bodyRefusal(request: Request): ApiError | undefined {
  return refusedBodies.get(request);
}

async function readWithin(body: ReadableStream<Uint8Array>, maxBytes: number): Promise<Uint8Array> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(chunks, total);
    total += value.byteLength;
    if (total > maxBytes) {
      // Stop pulling: what the client has not sent yet stays unread.
      void reader.cancel().catch(() => {});
      throw tooLarge(maxBytes);
    }
    chunks.push(value);
  }
}

function tooLarge(maxBytes: number): ApiError {
  return new ApiError("payload_too_large", `request body exceeds ${maxBytes} bytes`);
}
