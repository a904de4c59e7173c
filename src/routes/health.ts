import { Elysia, t } from "elysia";
import type { Deps } from "../deps";

const HealthModel = t.Object({
  status: t.Union([t.Literal("ok"), t.Literal("degraded")]),
  mode: t.Union([t.Literal("demo"), t.Literal("upstream")]),
  upstream: t.String(),
  store: t.Object({ kind: t.Literal("sqlite"), ok: t.Boolean() }),
  limiter: t.Object({ kind: t.String() }),
  budget: t.Object({ kind: t.String() }),
});

/** GET /healthz: liveness plus what an operator needs to know at a glance. */
export function healthRoutes(deps: Deps) {
  return new Elysia().get(
    "/healthz",
    ({ set }) => {
      const storeOk = pingStore(deps);
      if (!storeOk) set.status = 503;
      return {
        status: storeOk ? ("ok" as const) : ("degraded" as const),
        mode: deps.config.demoMode ? ("demo" as const) : ("upstream" as const),
        upstream: deps.config.demoMode ? "built-in mock upstream (demo mode: no UPSTREAM_API_KEY set)" : deps.config.upstreamBaseUrl,
        store: { kind: "sqlite" as const, ok: storeOk },
        limiter: { kind: "memory" },
        budget: { kind: "memory" },
      };
    },
    { response: { 200: HealthModel, 503: HealthModel }, detail: { tags: ["operations"], summary: "Health and mode" } },
  );
}

function pingStore(deps: Deps): boolean {
  try {
    deps.store.db.query("SELECT 1").get();
    return true;
  } catch {
    return false;
  }
}
