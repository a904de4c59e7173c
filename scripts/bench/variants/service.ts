/**
 * The service as src/index.ts starts it, with pieces taken out, to measure what each one
 * costs under load (scripts/bench/profile.ts --entry scripts/bench/variants/service.ts).
 * For measurement only: a variant without its guards is not a product.
 *
 *   BENCH_VARIANT=a,b,...   any of
 *     no-writer       usage rows are counted but not written (no SQLite insert per request)
 *     chat-core       POST /api/v1/chat/completions served by Bun.serve straight into the
 *                     service's own ChatService (key check, user's budget, reservation,
 *                     upstream call, relay, meter, ledger row), with no Elysia lifecycle and
 *                     none of the route's other pieces (body schema, rate limit,
 *                     idempotency, request id plugin, access log, CORS); every other path
 *                     goes to the whole app. What the metering core costs without a framework
 *     memory-log      every second, append process.memoryUsage() and the most numerous heap
 *                     object types (bun:jsc heapStats) to $BENCH_MEMORY_LOG, to see what
 *                     open streams keep alive
 *     async-reserve   PostgreSQL: reservations and journal entries commit without waiting for
 *                     the WAL, as before migration 22 (src/store/postgres/durable-reserve-sql.ts):
 *                     what durable reservations cost (BENCHMARKS.md)
 */
import { appendFileSync } from "node:fs";
import { loadConfig } from "../../../src/config";
import { connectDependencies, openDeps } from "../../../src/deps";
import { createApp } from "../../../src/app";
import { UsageWriter } from "../../../src/metering/usage-writer";
import type { UsageLedgerRepository } from "../../../src/store/usage-ledger";
import type { UsageRow } from "../../../src/budget/usage-row";
import { createLogger } from "../../../src/logger";
import { authenticateSecretKey } from "../../../src/auth/credentials";
import { userBudgetTarget } from "../../../src/services/budget-target";
import type { ChatBody } from "../../../src/services/chat";
import { ApiError } from "../../../src/errors";
import type { Store } from "../../../src/store";
import type { PostgresStore } from "../../../src/store/postgres";

const variant = new Set((process.env.BENCH_VARIANT ?? "").split(",").filter(Boolean));
const config = loadConfig(process.env);
const logger = createLogger(config.logLevel);

const discardingLedger = { insertBatch: async (rows: UsageRow[]) => rows.length } as unknown as UsageLedgerRepository;

// The store is the service's own, with its read cache and change feed.
const deps = await openDeps(config, {
  logger,
  ...(variant.has("no-writer") ? { usageWriter: new UsageWriter(discardingLedger, logger, config.usageFlushMs) } : {}),
});
await connectDependencies(deps);
await deps.catalogue.refresh();
if (variant.has("async-reserve")) await reserveWithoutWaitingForTheWal(deps.store);
const app = createApp(deps);
const CHAT_PATH = "/api/v1/chat/completions";
/** chat-core: the one hot route without the framework, for the floor it sets. */
const server = variant.has("chat-core")
  ? Bun.serve({
      port: config.port,
      hostname: config.host,
      maxRequestBodySize: config.maxBodyBytes * 4,
      async fetch(request, server) {
        if (request.method !== "POST" || !request.url.endsWith(CHAT_PATH)) return app.handle(request);
        try {
          const {
            app: { id: appId },
          } = await authenticateSecretKey(deps.store, request.headers.get("authorization"));
          const body = (await request.json()) as ChatBody;
          const target = await userBudgetTarget(deps.store.connections, deps.clock, appId, request.headers.get("x-service-user") ?? "");
          if (body.stream === true) server.timeout(request, 0);
          return await app.decorator.chat.complete({
            requestId: Bun.randomUUIDv7(),
            target,
            body,
            bodyBytes: Number(request.headers.get("content-length")),
            clientHeaders: request.headers,
          });
        } catch (err) {
          return Response.json({ error: String(err) }, { status: err instanceof ApiError ? err.status : 500 });
        }
      },
    })
  : app.listen({ port: config.port, hostname: config.host, maxRequestBodySize: config.maxBodyBytes * 4 }).server!;
logger.warn("bench variant listening", { variant: [...variant], port: server.port });

if (variant.has("memory-log")) {
  const { heapStats } = await import("bun:jsc");
  const mb = (n: number) => Math.round(n / 1024 / 1024);
  // BENCH_MEMORY_GC=1: a full collection before each reading, so the counts are live objects only.
  const collectFirst = process.env.BENCH_MEMORY_GC === "1";
  setInterval(() => {
    const gcStart = performance.now();
    if (collectFirst) Bun.gc(true);
    const gcMs = performance.now() - gcStart;
    const m = process.memoryUsage();
    const types = Object.entries(heapStats().objectTypeCounts)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 12);
    appendFileSync(
      process.env.BENCH_MEMORY_LOG ?? "bench-memory.log",
      JSON.stringify({
        rssMb: mb(m.rss),
        ...(collectFirst && { gcMs: Math.round(gcMs * 100) / 100 }),
        heapUsedMb: mb(m.heapUsed),
        heapTotalMb: mb(m.heapTotal),
        externalMb: mb(m.external),
        activeStreams: app.decorator.chat.activeStreams,
        types: Object.fromEntries(types),
      }) + "\n",
    );
  }, 1000).unref();
}

process.on("SIGTERM", async () => {
  await server.stop(true);
  await app.decorator.chat.idle(5000);
  await deps.usageWriter.close();
  await deps.budgetBackend.close();
  await deps.store.close();
  process.exit(0);
});

/** async-reserve: the two functions of migration 22 as they behaved before it (each commit returns before its WAL is written). */
async function reserveWithoutWaitingForTheWal(store: Store): Promise<void> {
  if (store.engine !== "postgres") throw new Error("async-reserve is a PostgreSQL variant (arms f and g)");
  await (store as PostgresStore).database.run((sql) =>
    sql.unsafe(`
      CREATE OR REPLACE FUNCTION budget_reserve_durable(p_items jsonb, p_instance text)
        RETURNS TABLE (item int, status int, a bigint, b bigint, allowed boolean, remaining int, reset_ms bigint)
        LANGUAGE plpgsql AS $$
      BEGIN
        RETURN QUERY SELECT * FROM budget_reserve_limited_many(p_items, p_instance);
      END $$;
      CREATE OR REPLACE FUNCTION call_journal_open(p_entries jsonb) RETURNS void LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM set_config('synchronous_commit', 'off', true);
        INSERT INTO call_journal SELECT * FROM jsonb_populate_recordset(NULL::call_journal, p_entries) ON CONFLICT (request_id) DO NOTHING;
      END $$;`),
  );
}
