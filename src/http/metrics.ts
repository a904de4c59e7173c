import { Elysia, t } from "elysia";
import type { MetricsSources } from "./prometheus-metrics";
import { ApiError } from "../errors";
import { hashSecret, secretMatches } from "../auth/secret-key";
import { errorResponses } from "../error-schema";
import type { ChatService } from "../services/chat";
import type { Reconciler } from "../metering/reconciler";

/** What one finished request tells the metrics (fed by the access log, src/http/access-log.ts). */
export interface FinishedRequest {
  route: string;
  method: string;
  status: number;
  errorCode?: string;
  appId?: string;
  /** Chat calls: what was charged, and whether it streamed. */
  costNano?: number;
  streamed?: boolean;
  seconds: number;
  /** Chat calls: from arrival to the response's headers (the first byte a client can read). */
  headersSeconds?: number;
}

/** What the access log feeds each finished request to, and the route reads. */
export interface MetricsRecorder {
  observe(r: FinishedRequest): void;
  readonly contentType: string;
  render(): Promise<string>;
}

/**
 * The Prometheus metrics when METRICS_TOKEN is set, else none: prom-client is loaded only
 * then: a service without metrics has no use for its memory (idle RSS 67.5 → 64.2 MB with
 * it left out, ARCHITECTURE.md §7 "Metrics only when asked").
 */
export function createMetrics(deps: MetricsSources, chat: ChatService, reconciler: Reconciler): MetricsRecorder | null {
  if (!deps.config.metricsToken) return null;
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a synchronous, lazy load (see above)
  const { ProxyMetrics } = require("./prometheus-metrics") as typeof import("./prometheus-metrics");
  return new ProxyMetrics(deps, chat, reconciler);
}

/**
 * GET /metrics in Prometheus's text format, behind `Authorization: Bearer $METRICS_TOKEN`.
 * Without a token configured it is off (404): the spend of every app, by app id, is the
 * operator's business, not any caller's.
 */
export function metricsRoute(metrics: MetricsRecorder | null, token: string | undefined) {
  // Compared as SHA-256 digests in constant time, like secret keys and the admin token:
  // equal lengths whatever the token, so not even its length shows in the timing.
  const expected = token ? hashSecret(`Bearer ${token}`) : null;
  return new Elysia().get(
    "/metrics",
    async ({ request, set }) => {
      if (!expected || !metrics) throw new ApiError("not_found", "metrics are off: set METRICS_TOKEN to serve them");
      if (!secretMatches(request.headers.get("authorization") ?? "", expected)) throw new ApiError("auth", "GET /metrics needs the metrics token");
      set.headers["content-type"] = metrics.contentType;
      return metrics.render();
    },
    {
      response: { 200: t.String({ description: "Metrics, in Prometheus's text format." }), ...errorResponses(401, 404) },
      detail: {
        tags: ["operations"],
        summary: "Prometheus metrics (text format)",
        description: "404 `not_found` while METRICS_TOKEN is unset (metrics are off).",
        security: [{ metricsToken: [] }],
      },
    },
  );
}
