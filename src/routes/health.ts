import { Elysia, t } from "elysia";
import { Type } from "@sinclair/typebox";
import type { Config } from "../config";
import type { Store } from "../store";
import type { BudgetBackend } from "../store/engine";
import type { UsageWriter } from "../metering/usage-writer";
import { STALE_AFTER_INTERVALS, type PricingCatalogue } from "../pricing/catalogue";
import type { RateLimiter } from "../ratelimit/rate-limiter";
import type { ChatService } from "../services/chat";
import type { OverrunMonitor } from "../metering/overrun-monitor";
import { operatorTokenMatcher } from "../auth/operator-token";
import { keyRefusalProblem } from "../upstream/operator-key";

const OperatorOnly = "Only with the operator's METRICS_TOKEN as a bearer credential.";

const HealthModel = t.Object({
  status: t.Union([t.Literal("ok"), t.Literal("degraded")]),
  problems: t.Array(t.String(), {
    description: "Why the status is degraded, one sentence each (those of /readyz, its warnings included); empty when ok.",
  }),
  mode: t.Union([t.Literal("demo"), t.Literal("upstream")]),
  upstream: t.String({ description: "The upstream's base URL, without any user name, password or query." }),
  store: t.Object({ kind: t.Union([t.Literal("sqlite"), t.Literal("postgres")]), ok: t.Boolean() }),
  limiter: t.Object({
    kind: t.String(),
    degraded: t.Boolean(),
    since: t.Optional(t.Nullable(t.String({ description: OperatorOnly }))),
    lastError: t.Optional(t.Nullable(t.String({ description: OperatorOnly }))),
  }),
  budget: t.Object({ kind: t.String(), ok: t.Boolean({ description: "False while Redis is unreachable: chat calls answer 503 (budgets fail closed)." }) }),
  writer: t.Object({
    failing: t.Boolean({ description: "The last flush failed; its rows are kept for the retry." }),
    pending: t.Optional(Type.Integer({ description: OperatorOnly })),
    written: t.Optional(Type.Integer({ description: OperatorOnly })),
    flushes: t.Optional(Type.Integer({ description: OperatorOnly })),
    failedFlushes: t.Optional(Type.Integer({ description: OperatorOnly })),
    lastError: t.Optional(t.Nullable(t.String({ description: OperatorOnly }))),
  }),
  pricing: t.Optional(t.Object({ models: Type.Integer(), refreshedAt: t.Nullable(t.String({ format: "date-time" })) }, { description: OperatorOnly })),
  activeStreams: t.Optional(Type.Integer({ description: OperatorOnly })),
  overruns: t.Optional(
    t.Object(
      { count: Type.Integer(), models: t.Record(t.String(), Type.Integer()) },
      { description: `Calls since start whose cost passed their reservation (the upstream billed above its catalogue), by model. ${OperatorOnly}` },
    ),
  ),
});

const ReadyModel = t.Object({
  ready: t.Boolean(),
  problems: t.Array(t.String(), { description: "Why the instance should not take traffic now; empty when ready." }),
  warnings: t.Array(t.String(), {
    description:
      "What is wrong but would be as wrong on every instance, so it does not make this one unready: the upstream refusing the operator's key (until a later call on it succeeds). Empty when nothing is.",
  }),
});

/**
 * GET /healthz: liveness plus what an operator needs to know at a glance. It answers 503
 * only when the store is unreachable (nothing can be served); other problems (an empty or
 * stale price list, a failing usage writer, Redis down) make it `degraded` with a reason.
 * GET /readyz: readiness, for a load balancer: 503 while any of those problems holds. The
 * upstream refusing the operator's key is degraded health and a warning of /readyz, not a
 * 503: every instance shares the key, so taking instances out of traffic would fix nothing,
 * would also stop the calls that need no upstream (connections, status), and would keep
 * away the call whose success shows the key fixed.
 *
 * Both need no credential, so they say only what is ok and what is not: the upstream's
 * address without its credentials, and no counters or error texts. With the operator's
 * METRICS_TOKEN /healthz adds the counters and the last errors.
 */
/** What the health routes read of the service's parts (src/deps.ts's Deps has each). */
export interface HealthSources {
  config: Config;
  store: Pick<Store, "engine" | "ping">;
  budgetBackend: Pick<BudgetBackend, "kind" | "server" | "limiterFallback">;
  usageWriter: Pick<UsageWriter, "failing" | "stats">;
  catalogue: Pick<PricingCatalogue, "refreshedAt" | "ageMs" | "size">;
  rateLimiter: Pick<RateLimiter, "kind">;
}

export function healthRoutes(deps: HealthSources, chat: ChatService, overruns: OverrunMonitor) {
  // The metrics token, not the admin token: that one is taken by the admin API alone.
  const isOperator = operatorTokenMatcher([deps.config.metricsToken]);
  const check = async () => {
    const storeOk = await pingStore(deps);
    // Where the budgets live was decided once, by the engines (src/deps.ts): on a server of
    // their own (Redis), or in this process or the store, reachable when it is.
    const { kind: budgetKind, server } = deps.budgetBackend;
    const budgetOk = server ? server.ready() : storeOk;
    const refusal = chat.operatorKey.current;
    const warnings = refusal ? [keyRefusalProblem(refusal)] : [];
    return { storeOk, budgetKind, budgetOk, problems: healthProblems(deps, storeOk, budgetOk), warnings };
  };
  return new Elysia()
    .get(
      "/healthz",
      async ({ request, set }) => {
        const { storeOk, budgetKind, budgetOk, problems: unready, warnings } = await check();
        if (!storeOk) set.status = 503;
        const problems = [...unready, ...warnings];
        const limiter = limiterState(deps);
        const summary = {
          status: problems.length === 0 ? ("ok" as const) : ("degraded" as const),
          problems,
          mode: deps.config.demoMode ? ("demo" as const) : ("upstream" as const),
          upstream: deps.config.demoMode ? "built-in mock upstream (demo mode: no UPSTREAM_API_KEY set)" : withoutCredentials(deps.config.upstreamBaseUrl),
          store: { kind: deps.store.engine, ok: storeOk },
          limiter: { kind: limiter.kind, degraded: limiter.degraded },
          budget: { kind: budgetKind, ok: budgetOk },
          writer: { failing: deps.usageWriter.failing },
        };
        if (!isOperator(request.headers.get("authorization"))) return summary;
        const { pending, written, flushes, failedFlushes, lastError } = deps.usageWriter.stats;
        const refreshedAt = deps.catalogue.refreshedAt;
        return {
          ...summary,
          limiter,
          writer: { ...summary.writer, pending, written, flushes, failedFlushes, lastError },
          pricing: { models: deps.catalogue.size, refreshedAt: refreshedAt === null ? null : new Date(refreshedAt).toISOString() },
          activeStreams: chat.activeStreams,
          overruns: overruns.state,
        };
      },
      {
        response: { 200: HealthModel, 503: HealthModel },
        detail: {
          tags: ["operations"],
          summary: "Liveness, mode and state",
          description: "Without a credential: what is ok and what is not. With the operator's token: also the counters and last errors.",
          security: [{}, { metricsToken: [] }],
        },
      },
    )
    .get(
      "/readyz",
      async ({ set }) => {
        const { problems, warnings } = await check();
        if (problems.length > 0) set.status = 503;
        return { ready: problems.length === 0, problems, warnings };
      },
      {
        response: { 200: ReadyModel, 503: ReadyModel },
        detail: { tags: ["operations"], summary: "Readiness: 503 while this instance cannot serve chat calls as it should", security: [] },
      },
    );
}

/**
 * The base URL as it may be shown to anyone: an operator may put credentials in it
 * (`https://user:pass@host/…`, or a key in the query), which /healthz must not echo.
 */
function withoutCredentials(baseUrl: string): string {
  try {
    const url = new URL(baseUrl);
    return `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, "")}`;
  } catch {
    return "(not a URL)";
  }
}

/** Each problem that makes the instance unfit for traffic, in words an operator can act on (no error texts: anyone may read them). */
function healthProblems(deps: HealthSources, storeOk: boolean, budgetOk: boolean): string[] {
  const problems: string[] = [];
  if (!storeOk) problems.push(`the store (${deps.store.engine}) is unreachable`);
  const server = deps.budgetBackend.server;
  if (!budgetOk && server) problems.push(`${server.name} is unreachable: chat calls answer 503 until it is back`);
  const { size, ageMs } = deps.catalogue;
  if (size === 0) {
    problems.push("the upstream's price list is empty (never loaded): chat calls are priced at the fallback price, every model bounded as one that reasons");
  } else if (ageMs !== null) {
    // Three refresh intervals without a successful load: the upstream's /models is failing.
    // One failed load alone does not make an instance unready: every instance would fail it
    // at once, while their calls are still bounded (src/pricing/worst-case.ts). The age is on
    // the catalogue's own clock, the one that stamped the load (not the request clock).
    const ageSeconds = Math.round(ageMs / 1000);
    if (ageSeconds > STALE_AFTER_INTERVALS * deps.config.pricingRefreshSeconds)
      problems.push(`the upstream's price list is stale: last loaded ${ageSeconds} s ago`);
  }
  if (deps.usageWriter.failing) problems.push("the usage writer is failing; its rows are kept for the retry (the operator's /healthz shows the error)");
  return problems;
}

function limiterState(deps: HealthSources) {
  const fallback = deps.budgetBackend.limiterFallback;
  if (fallback) return { kind: fallback.kind, ...fallback.state };
  return { kind: deps.rateLimiter.kind, degraded: false, since: null, lastError: null };
}

async function pingStore(deps: HealthSources): Promise<boolean> {
  try {
    await deps.store.ping();
    return true;
  } catch {
    return false;
  }
}
