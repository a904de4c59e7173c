import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Config } from "../config";
import type { UsageWriter } from "../metering/usage-writer";
import type { BudgetBackend } from "../store/engine";
import type { BudgetLedger } from "../budget/ledger";
import type { WebhookDispatcher } from "../webhooks/dispatcher";
import type { ChatService } from "../services/chat";
import type { Reconciler } from "../metering/reconciler";
import type { FinishedRequest, MetricsRecorder } from "./metrics";

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const BUDGET_REFUSALS = new Set(["budget_exceeded", "grant_invalid", "not_connected", "funding_invalid"]);

/** What the metrics read of the service's parts (src/deps.ts's Deps has each). */
export interface MetricsSources {
  config: Pick<Config, "metricsToken">;
  usageWriter: Pick<UsageWriter, "stats">;
  budgetBackend: Pick<BudgetBackend, "limiterFallback">;
  budget: Pick<BudgetLedger, "accountsInMemory">;
  webhooks: Pick<WebhookDispatcher, "stats">;
}

/**
 * Prometheus metrics (prom-client), one registry per app so tests can build many. Request
 * counters come from each finished request; queue and stream gauges are read when scraped.
 */
export class ProxyMetrics implements MetricsRecorder {
  readonly registry = new Registry();
  readonly contentType = this.registry.contentType;
  private readonly requests = new Counter({
    name: "proxy_requests_total",
    help: "Requests by route, method and status.",
    labelNames: ["route", "method", "status"],
    registers: [this.registry],
  });
  private readonly chatSeconds = new Histogram({
    name: "proxy_chat_duration_seconds",
    help: "Chat calls, arrival to last byte (streams included), by stream or not.",
    labelNames: ["stream"],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly chatHeadersSeconds = new Histogram({
    name: "proxy_chat_time_to_first_byte_seconds",
    help: "Chat calls, arrival to response headers (time to first byte).",
    labelNames: ["stream"],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly upstreamErrors = new Counter({
    name: "proxy_upstream_errors_total",
    help: "Chat calls that failed upstream, by error code.",
    labelNames: ["code"],
    registers: [this.registry],
  });
  private readonly refusals = new Counter({
    name: "proxy_budget_refusals_total",
    help: "Chat calls refused before going upstream for want of budget, by error code.",
    labelNames: ["code"],
    registers: [this.registry],
  });
  private readonly spend = new Counter({
    name: "proxy_spend_usd_total",
    help: "USD charged to budgets, by app.",
    labelNames: ["app"],
    registers: [this.registry],
  });

  constructor(deps: MetricsSources, chat: ChatService, reconciler: Reconciler) {
    const gauge = (name: string, help: string, read: () => number) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.set(read());
        },
      });
    gauge("proxy_usage_writer_pending_rows", "Ledger rows queued in this process, not yet written.", () => deps.usageWriter.stats.pending);
    gauge("proxy_usage_writer_failed_flushes", "Writer flushes that failed since start (their rows were kept).", () => deps.usageWriter.stats.failedFlushes);
    gauge("proxy_usage_writer_written_rows", "Ledger rows written by this process's writer since start.", () => deps.usageWriter.stats.written);
    gauge(
      "proxy_rate_limit_fallback_checks",
      "Rate-limit checks answered in-process because the shared limiter was down.",
      () => deps.budgetBackend.limiterFallback?.fallbackChecks ?? 0,
    );
    const webhooks = deps.webhooks.stats;
    gauge("proxy_webhook_delivered", "Webhook deliveries accepted (2xx) by receivers, since start.", () => webhooks.delivered);
    gauge("proxy_webhook_failed_attempts", "Webhook attempts that failed (to be retried, or given up), since start.", () => webhooks.failedAttempts);
    gauge("proxy_webhook_given_up", "Webhook deliveries that failed for good after the last retry, since start.", () => webhooks.gaveUp);
    gauge("proxy_webhook_endpoints_disabled", "Webhook endpoints disabled because they answered 410 Gone, since start.", () => webhooks.endpointsDisabled);
    gauge(
      "proxy_webhook_secret_unreadable",
      "Webhook attempts not sent because the endpoint's signing secret does not open with this process's secrets keys, since start.",
      () => webhooks.secretUnreadable,
    );
    gauge(
      "proxy_budget_accounts_in_memory",
      "Budget accounts whose live counters this process holds (embedded counters; 0 when Redis or PostgreSQL keeps them).",
      () => deps.budget.accountsInMemory ?? 0,
    );
    gauge("proxy_open_streams", "Chat streams open (relaying, or draining for their usage).", () => chat.activeStreams);
    const operatorKey = chat.operatorKey;
    // Counted by the chat service as it meets them (the access line sees only `upstream`), read when scraped.
    new Counter({
      name: "proxy_upstream_key_refusals_total",
      help: "Chat calls on which the upstream refused the operator's key (401, 402, or 403 key limit), by HTTP status, since start.",
      labelNames: ["status"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [status, count] of operatorKey.refusalsByStatus) this.inc({ status: String(status) }, count);
      },
    });
    const invalidUsage = chat.meter.invalidUsage;
    new Counter({
      name: "proxy_upstream_usage_invalid_total",
      help: "Calls whose upstream reported usage that cannot be true (a cost or token count not a count, or absurd for the call), each charged its reservation (row status upstream_usage_invalid), since start.",
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(invalidUsage.count);
      },
    });
    // Calls whose usage the proxy did not see, settled from the upstream's records (or at
    // their reservations) by this process's reconciler, since start.
    const reconciled = reconciler.stats;
    gauge("proxy_reconciled_from_records", "Calls settled at the upstream's record of their generation, since start.", () => reconciled.fromRecords);
    gauge(
      "proxy_reconciled_at_reservation",
      "Calls charged their whole reservation (no generation id, or no record in time), since start.",
      () => reconciled.atReservation,
    );
    gauge(
      "proxy_reconciled_released_holds",
      "Holds of dead processes released because their calls never went upstream, since start.",
      () => reconciled.released,
    );
    gauge("proxy_reconciled_charged_usd", "USD charged for reconciled calls, since start.", () => reconciled.chargedNano / 1e9);
    gauge(
      "proxy_reconciliation_adjustment_usd",
      "USD held for reconciled calls but not charged (held minus charged), since start.",
      () => (reconciled.heldNano - reconciled.chargedNano) / 1e9,
    );
  }

  observe(r: FinishedRequest): void {
    this.requests.inc({ route: r.route, method: r.method, status: String(r.status) });
    if (r.costNano !== undefined && r.appId) this.spend.inc({ app: r.appId }, r.costNano / 1e9);
    if (r.errorCode && BUDGET_REFUSALS.has(r.errorCode)) this.refusals.inc({ code: r.errorCode });
    if (r.errorCode === "upstream" || (r.errorCode === "funding_invalid" && r.costNano !== undefined)) this.upstreamErrors.inc({ code: r.errorCode });
    if (r.streamed !== undefined) {
      const stream = String(r.streamed);
      this.chatSeconds.observe({ stream }, r.seconds);
      if (r.headersSeconds !== undefined) this.chatHeadersSeconds.observe({ stream }, r.headersSeconds);
    }
  }

  async render(): Promise<string> {
    return this.registry.metrics();
  }
}
