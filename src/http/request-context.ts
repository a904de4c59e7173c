import { Elysia } from "elysia";
import { ApiError } from "../errors";
import { RequestContext } from "../request/context";
import type { ClientAddresses } from "../request/client-address";
import { requestContextSlot } from "../request/elysia";
import { limitUndeclaredBody } from "./body-limit";
import { boundJsonBody } from "./json-body";

/**
 * Makes each request's RequestContext, in the first hook that runs, and does the per-request
 * basics every route shares: an `x-request-id` on every response (also errors, since the
 * error handler keeps `set.headers`) with the client's own echoed as `x-client-request-id`;
 * and 413 for bodies over the limit: a declared length is refused before anything reads the
 * body; a body without a length (chunked) is cut where it passes the limit, see
 * body-limit.ts; and 400 for JSON bodies past their structural bounds (nesting, number of
 * values) or in a form, see json-body.ts. `addresses` says who the client is (the peer, or
 * behind a trusted proxy the forwarded address), once, for every per-client limit.
 */
export function requestContext(maxBodyBytes: number, addresses: ClientAddresses) {
  return new Elysia()
    .use(requestContextSlot)
    .onRequest((context) => {
      const { request, set, server } = context;
      const made = new RequestContext(request.headers, addresses.of(server?.requestIP(request)?.address, request.headers));
      context.requestContext = made;
      if (made.clientRequestId) set.headers["x-client-request-id"] = made.clientRequestId;
      set.headers["x-request-id"] = made.requestId;
      const length = request.headers.get("content-length");
      if (length !== null && Number(length) > maxBodyBytes) {
        throw new ApiError("payload_too_large", `request body exceeds ${maxBodyBytes} bytes`);
      }
    })
    .onParse({ as: "global" }, ({ request, requestContext }, mediaType) => {
      limitUndeclaredBody(request, maxBodyBytes, requestContext);
      // After the limit: its bounded reader is the one the JSON bound reads through.
      boundJsonBody(request, mediaType, requestContext);
    })
    .onTransform({ as: "global" }, ({ requestContext }) => {
      // Elysia swallows parse errors of optional bodies (POST /connections), which would turn
      // a refused body (413 in body-limit.ts, 400 in json-body.ts) into "no body". Checked
      // after parsing, so the refusal stands either way.
      if (requestContext.bodyRefusal) throw requestContext.bodyRefusal;
    });
}
