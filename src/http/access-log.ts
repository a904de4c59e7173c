import { Elysia } from "elysia";
import type { Logger } from "../logger";
import { requestContextSlot } from "../request/elysia";
import type { MetricsRecorder } from "./metrics";

/**
 * One structured line per request (`msg: "request"`), written once the response is done:
 * for a streamed chat call, once it has been metered, so the line carries its cost. Its
 * fields are the request's context's (src/request/context.ts, AccessFields): ids and
 * numbers only, never a secret key, session or grant token, or the Authorization header
 * (a test scans the log of a scripted session for them).
 */
export function accessLog(logger: Logger, metrics?: MetricsRecorder) {
  return new Elysia().use(requestContextSlot).onAfterResponse({ as: "global" }, ({ request, requestContext, set, route }) => {
    const { requestId, clientRequestId, startedAt, log } = requestContext;
    const status = typeof set.status === "number" ? set.status : Number(set.status) || 200;
    const method = request.method;
    const routeName = route || new URL(request.url).pathname;
    // A stream's line waits for its metering, but this hook does not: an awaiting hook
    // kept the request's whole context (the Request, the parsed body, `set`) alive while
    // the stream ran, about 2 KB of heap per open stream (ARCHITECTURE.md §7 "Access-log
    // hook does not wait"). Only what the line needs is kept.
    const write = () => {
      const finishedAt = performance.now();
      metrics?.observe({
        route: route || "(unmatched)",
        method,
        status,
        errorCode: log.errorCode,
        appId: log.appId,
        costNano: log.costNano,
        streamed: log.streamed,
        seconds: (finishedAt - startedAt) / 1000,
        headersSeconds: log.headersAt === undefined ? undefined : (log.headersAt - startedAt) / 1000,
      });
      // Absent fields are undefined, which the JSON line leaves out (no object per field).
      logger.info("request", {
        requestId,
        clientRequestId: clientRequestId || undefined,
        method,
        route: routeName,
        status,
        errorCode: log.errorCode || undefined,
        appId: log.appId || undefined,
        appUserId: log.appUserId || undefined,
        grantId: log.grantId || undefined,
        model: log.model || undefined,
        costUsd: log.model ? (log.costNano ?? 0) / 1e9 : undefined,
        latencyMs: Math.round((finishedAt - startedAt) * 10) / 10,
      });
    };
    if (log.metered) log.metered.then(write, write);
    else write();
  });
}
