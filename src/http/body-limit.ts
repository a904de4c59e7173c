import { ApiError } from "../errors";
import type { RequestContext } from "../request/context";

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
 * object stays the same one, which `server.timeout(request)` and `server.requestIP(request)`
 * rely on.
 *
 * A refusal is also kept on the request's context (`bodyRefusal`): Elysia swallows parse
 * errors of optional bodies, and its multipart parser fails on a refused form with a
 * ParseError of its own, so the transform hook and the error handler answer with it.
 */
const BODY_READERS = ["json", "text", "arrayBuffer", "formData", "blob", "bytes"] as const;

/** Keeps why the request's body was refused, and returns the error for the reader to throw. */
export function refuseBody(context: RequestContext, error: ApiError): ApiError {
  context.bodyRefusal = error;
  return error;
}

export function limitUndeclaredBody(request: Request, maxBytes: number, context: RequestContext): void {
  if (request.headers.has("content-length") || request.body === null) return;
  const body = request.body;
  const contentType = request.headers.get("content-type") ?? "";
  let bytes: Promise<Uint8Array> | undefined;
  const readOnce = async () =>
    (bytes ??= readWithin(body, maxBytes).catch((err) => {
      throw err instanceof ApiError ? refuseBody(context, err) : err;
    }));
  for (const method of BODY_READERS) {
    Object.defineProperty(request, method, {
      configurable: true,
      // Parsing is left to a Response over the same bytes, so it is exactly Bun's.
      value: async () => new Response(await readOnce(), { headers: { "content-type": contentType } })[method](),
    });
  }
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
