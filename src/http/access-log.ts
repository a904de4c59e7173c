import { Elysia } from "elysia";
import type { Logger } from "../logger";
import type { MetricsRecorder } from "./metrics";
import { clientRequestId } from "../upstream/headers";

/**
 * One structured line per request (`msg: "request"`), written once the response is done:
 * for a streamed chat call, once it has been metered, so the line carries its cost.
 * Fields are ids and numbers only: never a secret key, session or grant token, or the
 * Authorization header (a test scans the log of a scripted session for them).
 */
export interface AccessEntry {
  startedAt: number;
  /** Our `x-request-id`, kept here too: a route may hand its headers to its Response (see handOverHeaders). */
  requestId?: string;
  /** The client's own `x-request-id`, when it passed validation (see clientRequestId). */
  clientRequestId?: string;
  appId?: string;
  appUserId?: string | null;
  grantId?: string | null;
  errorCode?: string;
  /** Chat calls: the model asked for, and the cost charged. */
  model?: string;
  costNano?: number;
  /** Chat streams: settles when the stream is metered; the line waits for it. */
  metered?: Promise<void>;
  /** Chat calls: whether the client asked for a stream, and when the response's headers were ready. */
  streamed?: boolean;
  headersAt?: number;
}

const entries = new WeakMap<Request, AccessEntry>();

/** The request's entry, for hooks and handlers to add what they know. */
export function accessEntry(request: Request): AccessEntry {
  let entry = entries.get(request);
  if (!entry) {
    entry = { startedAt: performance.now() };
    entries.set(request, entry);
  }
  return entry;
}

export function accessLog(logger: Logger, metrics?: MetricsRecorder) {
  return new Elysia()
    .onRequest(({ request, set }) => {
      const entry = accessEntry(request);
      entry.clientRequestId = clientRequestId(request.headers);
      if (entry.clientRequestId) set.headers["x-client-request-id"] = entry.clientRequestId;
    })
    .onAfterResponse({ as: "global" }, ({ request, set, route }) => {
      const entry = accessEntry(request);
      const status = typeof set.status === "number" ? set.status : Number(set.status) || 200;
      const requestId = entry.requestId ?? set.headers["x-request-id"];
      const method = request.method;
      const routeName = route || new URL(request.url).pathname;
      // A stream's line waits for its metering, but this hook does not: an awaiting hook
      // kept the request's whole context (the Request, the parsed body, `set`) alive while
      // the stream ran, about 1.5 KB of heap per open stream (BENCHMARKS.md, issue 14).
      // Only what the line needs is kept.
      const write = () => {
        const finishedAt = performance.now();
        metrics?.observe({
          route: route || "(unmatched)",
          method,
          status,
          errorCode: entry.errorCode,
          appId: entry.appId,
          costNano: entry.costNano,
          streamed: entry.streamed,
          seconds: (finishedAt - entry.startedAt) / 1000,
          headersSeconds: entry.headersAt === undefined ? undefined : (entry.headersAt - entry.startedAt) / 1000,
        });
        // Absent fields are undefined, which the JSON line leaves out (no object per field).
        logger.info("request", {
          requestId,
          clientRequestId: entry.clientRequestId || undefined,
          method,
          route: routeName,
          status,
          errorCode: entry.errorCode || undefined,
          appId: entry.appId || undefined,
          appUserId: entry.appUserId || undefined,
          grantId: entry.grantId || undefined,
          model: entry.model || undefined,
          costUsd: entry.model ? (entry.costNano ?? 0) / 1e9 : undefined,
          latencyMs: Math.round((finishedAt - entry.startedAt) * 10) / 10,
        });
      };
      if (entry.metered) entry.metered.then(write, write);
      else write();
    });
}
