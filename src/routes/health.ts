import { Elysia, t } from "elysia";
import { Type } from "@sinclair/typebox";
import type { Deps } from "../deps";
import type { ChatService } from "../services/chat";
import { FallbackRateLimiter } from "../ratelimit/fallback-rate-limiter";
import type { OverrunMonitor } from "../metering/overrun-monitor";

const HealthModel = t.Object({
  status: t.Union([t.Literal("ok"), t.Literal("degraded")]),
  mode: t.Union([t.Literal("demo"), t.Literal("upstream")]),
  upstream: t.String(),
  store: t.Object({ kind: t.Union([t.Literal("sqlite"), t.Literal("postgres")]), ok: t.Boolean() }),
  limiter: t.Object({ kind: t.String(), degraded: t.Boolean(), since: t.Nullable(t.String()), lastError: t.Nullable(t.String()) }),
  budget: t.Object({ kind: t.String(), ok: t.Boolean({ description: "False while Redis is unreachable: chat calls answer 503 (budgets fail closed)." }) }),
  pricing: t.Object({ models: Type.Integer(), refreshedAt: t.Nullable(t.String({ format: "date-time" })) }),
  writer: t.Object({
    pending: Type.Integer(),
    written: Type.Integer(),
    flushes: Type.Integer(),
    failedFlushes: Type.Integer(),
    lastError: t.Nullable(t.String()),
  }),
  activeStreams: Type.Integer(),
  overruns: t.Object(
    { count: Type.Integer(), models: t.Record(t.String(), Type.Integer()) },
    { description: "Calls since start whose cost passed their reservation (the upstream billed above its catalogue), by model." },
  ),
});

/** GET /healthz: liveness plus what an operator needs to know at a glance. */
export function healthRoutes(deps: Deps, chat: ChatService, overruns: OverrunMonitor) {
  return new Elysia().get(
    "/healthz",
    async ({ set }) => {
      const storeOk = await pingStore(deps);
      if (!storeOk) set.status = 503;
      // Budgets live in Redis when it is set, in PostgreSQL when the store is, else here.
      const budgetKind = deps.redis ? "redis" : deps.store.engine === "postgres" ? "postgres" : "memory";
      const budgetOk = deps.redis ? deps.redis.status === "ready" : storeOk;
      const { pending, written, flushes, failedFlushes, lastError } = deps.usageWriter.stats;
      const refreshedAt = deps.catalogue.refreshedAt;
      return {
        status: storeOk && budgetOk ? ("ok" as const) : ("degraded" as const),
        mode: deps.config.demoMode ? ("demo" as const) : ("upstream" as const),
        upstream: deps.config.demoMode ? "built-in mock upstream (demo mode: no UPSTREAM_API_KEY set)" : deps.config.upstreamBaseUrl,
        store: { kind: deps.store.engine, ok: storeOk },
        limiter: limiterState(deps),
        budget: { kind: budgetKind, ok: budgetOk },
        pricing: { models: deps.catalogue.size, refreshedAt: refreshedAt === null ? null : new Date(refreshedAt).toISOString() },
        writer: { pending, written, flushes, failedFlushes, lastError },
        activeStreams: chat.activeStreams,
        overruns: overruns.state,
      };
    },
    { response: { 200: HealthModel, 503: HealthModel }, detail: { tags: ["operations"], summary: "Health and mode" } },
  );
}

function limiterState(deps: Deps) {
  const limiter = deps.rateLimiter;
  if (limiter instanceof FallbackRateLimiter) return { kind: limiter.kind, ...limiter.state };
  return { kind: limiter.kind, degraded: false, since: null, lastError: null };
}

async function pingStore(deps: Deps): Promise<boolean> {
  try {
    await deps.store.ping();
    return true;
  } catch {
    return false;
  }
}
