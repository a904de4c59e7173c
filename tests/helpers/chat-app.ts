/**
 * An app wired to a fake upstream (the project's mock, or a hand-driven one) with a
 * memory store and a manual clock, for chat and metering tests through app.handle.
 */
import { createApp } from "../../src/app";
import { connectDependencies, openDeps, type Deps } from "../../src/deps";
import { loadConfig } from "../../src/config";
import { openSqliteStore } from "../../src/store/sqlite";
import type { Database } from "bun:sqlite";
import { ManualClock } from "../../src/clock";
import { usdToNanoFloor } from "../../src/money";
import { memoryLogger } from "../../src/logger";
import { createMockUpstream, type MockUpstream, type MockUpstreamOptions } from "../../packages/mock-upstream/src";
import { UpstreamClient, type FetchUpstream } from "../../src/upstream/client";
import { PricingCatalogue, type RefreshTimers } from "../../src/pricing/catalogue";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

export const UPSTREAM_KEY = "sk-or-test-upstream-key";

export interface ChatTestApp {
  app: ReturnType<typeof createApp>;
  deps: Deps;
  /** The SQLite database behind deps.store, for direct reads. */
  db: Database;
  clock: ManualClock;
  mock: MockUpstream;
  logs: string[];
  appId: string;
  secretKey: string;
  /** Approves a cap for a user directly in the store. */
  connect(appUserId: string, monthlyUsd: number): Promise<void>;
  chat(body: Record<string, unknown>, headers?: Record<string, string>): Promise<Response>;
  get(path: string): Promise<Response>;
  /**
   * Brings metering to rest: waits for the settles under way, runs a reconciler round (the
   * calls whose usage was not seen, settled from the mock's records), writes queued rows.
   */
  flush(): Promise<void>;
}

export interface ChatTestAppOptions {
  env?: Record<string, string>;
  fetchUpstream?: FetchUpstream;
  clock?: ManualClock;
  storePath?: string;
  /** The mock upstream's catalogue and defaults (e.g. BILLING_MODELS). */
  mock?: MockUpstreamOptions;
  /** While `down` is true the upstream's GET /models answers 503: the price list cannot load. `asked` counts its calls. */
  modelsListing?: { down: boolean; asked: number };
  /** The price list's refresh beat runs on these (a fake clock); it starts only when a test starts it. */
  pricingTimers?: RefreshTimers;
}

export async function chatTestApp(options: ChatTestAppOptions = {}): Promise<ChatTestApp> {
  const clock = options.clock ?? new ManualClock(Date.UTC(2026, 0, 15, 12));
  const logger = memoryLogger();
  const mock = createMockUpstream(options.mock);
  const fetchUpstream: FetchUpstream = options.fetchUpstream ?? ((url, init) => mock.fetch(new Request(url, init)));
  const config = loadConfig({
    UPSTREAM_API_KEY: UPSTREAM_KEY,
    UPSTREAM_BASE_URL: "http://upstream.test/api/v1",
    DATABASE_URL: "sqlite::memory:",
    DISCONNECT_DRAIN_MS: "2000",
    ...options.env,
  });
  // Prices always come from the mock's /models, even when a hand-driven upstream serves chats.
  const pricingFetch: FetchUpstream = async (url, init) => {
    const listing = options.modelsListing;
    if (listing && new URL(url).pathname.endsWith("/models")) {
      listing.asked++;
      if (listing.down) return Response.json({ error: { code: 503, message: "models are unavailable" } }, { status: 503 });
    }
    return mock.fetch(new Request(url, init));
  };
  const pricingUpstream = new UpstreamClient(pricingFetch, config.upstreamBaseUrl, UPSTREAM_KEY, 5000);
  const catalogue = new PricingCatalogue(
    () => pricingUpstream.listModels(),
    {
      promptUsdPerToken: config.fallbackPromptUsdPerToken,
      completionUsdPerToken: config.fallbackCompletionUsdPerToken,
      contextTokens: config.fallbackContextTokens,
    },
    logger,
    options.pricingTimers,
  );
  await catalogue.refresh();
  const store = openSqliteStore(options.storePath ?? ":memory:");
  // As the server does: JWT_SECRET when the test sets it, else the secret kept in the store.
  const deps = await openDeps(config, { store, clock, logger, fetchUpstream, catalogue });
  await connectDependencies(deps);
  const app = createApp(deps);
  const { app: created, key } = await createAppWithKey(deps.store.apps, "chat-test", ["http://localhost:3000"], clock.now());
  const auth = { authorization: `Bearer ${key.secretKey}` };
  return {
    app,
    deps,
    db: store.db,
    clock,
    mock,
    logs: logger.lines,
    appId: created.id,
    secretKey: key.secretKey,
    connect: async (appUserId, monthlyUsd) => void (await deps.store.connections.approve(created.id, appUserId, usdToNanoFloor(monthlyUsd), clock.now())),
    chat: (body, headers = {}) =>
      app.handle(
        new Request("http://localhost/api/v1/chat/completions", {
          method: "POST",
          headers: { ...auth, "content-type": "application/json", "x-service-user": "alice", ...headers },
          body: JSON.stringify(body),
        }),
      ),
    get: (path) => app.handle(new Request(`http://localhost${path}`, { headers: auth })),
    flush: async () => {
      await app.decorator.chat.idle(10_000);
      // Calls whose usage was not seen are settled from the mock's records of them.
      await app.decorator.reconciler.runRound();
      await deps.usageWriter.flush();
    },
  };
}

/** An upstream whose SSE body the test writes by hand, to observe relaying without timing. */
export function handDrivenUpstream() {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let cancelled = false;
  const requests: Array<{ url: string; body: unknown }> = [];
  /** The upstream's records of its generations (GET /generation): id → total_cost in USD; 404 for others. */
  const records = new Map<string, number>();
  const fetchUpstream: FetchUpstream = async (url, init) => {
    const record = /\/generation\?id=([^&]+)$/.exec(url);
    if (record) {
      const cost = records.get(decodeURIComponent(record[1]!));
      if (cost === undefined) return Response.json({ error: { code: 404, message: "Generation not found" } }, { status: 404 });
      return Response.json({ data: { id: decodeURIComponent(record[1]!), total_cost: cost, tokens_prompt: 9, tokens_completion: 3 } });
    }
    requests.push({ url, body: JSON.parse(String(init.body)) });
    const body = new ReadableStream<Uint8Array>({
      start: (c) => {
        controller = c;
      },
      cancel: () => {
        cancelled = true;
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream", "x-generation-id": "gen-hand" } });
  };
  const enc = new TextEncoder();
  return {
    fetchUpstream,
    requests,
    records,
    send: (data: string | Uint8Array) => controller.enqueue(typeof data === "string" ? enc.encode(data) : data),
    end: () => controller.close(),
    fail: (err: Error) => controller.error(err),
    get cancelled() {
      return cancelled;
    },
  };
}
