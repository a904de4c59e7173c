/**
 * With PostgreSQL alone, a chat call's rate limit is checked in the same statement as its
 * budget reservation (migration 9's budget_reserve_limited_many; src/http/rate-limit-macro.ts
 * DeferredRateLimit), as it is in one script with Redis. What must hold, as there: the
 * call sends one statement that touches the window, and it is the one that reserves; the
 * limit still comes before the budget and a refused call reserves nothing; calls that
 * never reach the reservation still count; while the limiter falls back to its in-process
 * windows, the check is made on its own again. And, as for every batch: decisions taken
 * together are those taken one after the other, exact across instances.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app";
import { connectDependencies, openDeps, type Deps } from "../../src/deps";
import { loadConfig } from "../../src/config";
import { ManualClock } from "../../src/clock";
import { memoryLogger } from "../../src/logger";
import { usdToNanoFloor } from "../../src/money";
import { createMockUpstream } from "../../packages/mock-upstream/src";
import { openPostgresStore, type PostgresStore } from "../../src/store/postgres";
import { postgresEngine } from "../../src/store/postgres/engine";
import type { PostgresDatabase } from "../../src/store/postgres/database";
import { FallbackRateLimiter } from "../../src/ratelimit/fallback-rate-limiter";
import { PostgresRateLimiter } from "../../src/store/postgres/rate-limiter";
import { PostgresBudgetLedger } from "../../src/store/postgres/budget-ledger";
import { startPostgres, type TestPostgres } from "../helpers/postgres";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

const ask = { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 5 };
const LIMIT = 5;

let pg: TestPostgres;
let url: string;
const stores: PostgresStore[] = [];
beforeAll(async () => {
  pg = await startPostgres();
  url = await pg.createDatabase();
});
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await pg?.destroy();
});

/** Records the text of every statement the store's pool runs from now on. */
function recordStatements(database: PostgresDatabase): string[] {
  const seen: string[] = [];
  const run = database.run.bind(database);
  database.run = ((work) =>
    run((conn) =>
      work(
        new Proxy(conn, {
          apply(target, self, args: [TemplateStringsArray, ...unknown[]]) {
            seen.push(args[0].join("$"));
            return Reflect.apply(target, self, args);
          },
        }),
      ),
    )) as typeof database.run;
  return seen;
}

interface Instance {
  deps: Deps;
  store: PostgresStore;
  statements: string[];
  chat(user: string): Promise<Response>;
  /** Resolves once the settles under way are done. */
  idle(): Promise<void>;
}

/** One proxy instance (its own pool, ledger and limiter) on the shared database. */
async function instance(appId?: string, secretKey?: string): Promise<Instance & { appId: string; secretKey: string }> {
  const store = await openPostgresStore(url, { poolSize: 8 });
  stores.push(store);
  const statements = recordStatements(store.database);
  const mock = createMockUpstream();
  const config = loadConfig({
    UPSTREAM_API_KEY: "sk-or-test-upstream-key",
    UPSTREAM_BASE_URL: "http://upstream.test/api/v1",
    DATABASE_URL: url,
    RL_CHAT_LIMIT: String(LIMIT),
  });
  const deps = await openDeps(config, {
    engine: postgresEngine(store),
    clock: new ManualClock(Date.UTC(2026, 0, 15, 12)),
    logger: memoryLogger(),
    fetchUpstream: (u, init) => mock.fetch(new Request(u, init)),
  });
  await connectDependencies(deps);
  await deps.catalogue.refresh();
  const app = createApp(deps);
  if (!appId) {
    const created = await createAppWithKey(deps.store.apps, `folded-${crypto.randomUUID()}`, ["http://localhost:3000"], deps.clock.now());
    appId = created.app.id;
    secretKey = created.key.secretKey;
  }
  return {
    deps,
    store,
    statements,
    appId,
    secretKey: secretKey!,
    idle: () => app.decorator.chat.idle(10_000),
    chat: (user) =>
      app.handle(
        new Request("http://localhost/api/v1/chat/completions", {
          method: "POST",
          headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/json", "x-service-user": user },
          body: JSON.stringify(ask),
        }),
      ),
  };
}

const hitsOf = async (store: PostgresStore, appId: string, user: string) => {
  const [r] = await store.database.run((sql) => sql`SELECT count(*)::int AS n FROM rate_limit_hits WHERE key = ${`chat:${appId}:user:${user}`}`);
  return Number(r.n);
};
const reservationsLeft = async (store: PostgresStore) => {
  const [r] = await store.database.run((sql) => sql`SELECT count(*)::int AS n FROM budget_reservations`);
  return Number(r.n);
};
const connect = (i: Instance & { appId: string }, user: string, usd: number) =>
  i.deps.store.connections.approve(i.appId, user, usdToNanoFloor(usd), i.deps.clock.now());

describe("the chat rate limit folded into the PostgreSQL reservation", () => {
  test("one statement per call takes the check, and it is the one that reserves", async () => {
    const t = await instance();
    await connect(t, "alice", 5);
    t.statements.length = 0;
    for (let i = 0; i < 3; i++) expect((await t.chat("alice")).status).toBe(200);
    expect(t.statements.filter((s) => s.includes("rate_limit_take_many"))).toHaveLength(0);
    expect(t.statements.filter((s) => s.includes("budget_reserve_durable"))).toHaveLength(3);
    expect(await hitsOf(t.store, t.appId, "alice")).toBe(3);
  });

  test("the limit is counted and refused as before: the headers, then 429 with Retry-After, nothing reserved", async () => {
    const t = await instance();
    await connect(t, "bob", 5);
    const first = await t.chat("bob");
    expect(first.status).toBe(200);
    expect(first.headers.get("ratelimit-limit")).toBe(String(LIMIT));
    expect(first.headers.get("ratelimit-remaining")).toBe("4");
    for (let i = 0; i < 4; i++) expect((await t.chat("bob")).status).toBe(200);
    const limited = await t.chat("bob");
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(limited.headers.get("ratelimit-remaining")).toBe("0");
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe("rate_limited");
    await t.idle();
    expect(await reservationsLeft(t.store)).toBe(0);
    expect(await hitsOf(t.store, t.appId, "bob")).toBe(LIMIT);
  });

  test("a call refused by its budget still counts, and carries the RateLimit headers", async () => {
    const t = await instance();
    await connect(t, "carol", 0.000001);
    const refused = await t.chat("carol");
    expect(refused.status).toBe(402);
    expect(refused.headers.get("ratelimit-remaining")).toBe("4");
    expect(await hitsOf(t.store, t.appId, "carol")).toBe(1);
  });

  test("calls that end before any reservation (no connection) still count toward the window", async () => {
    const t = await instance();
    for (let i = 0; i < LIMIT; i++) expect((await t.chat("nobody")).status).toBe(402);
    let hits = 0;
    for (let i = 0; i < 200 && hits < LIMIT; i++) {
      hits = await hitsOf(t.store, t.appId, "nobody");
      if (hits < LIMIT) await Bun.sleep(10);
    }
    expect(hits).toBe(LIMIT);
    await connect(t, "nobody", 5);
    expect((await t.chat("nobody")).status).toBe(429);
  });

  test("while the limiter falls back to in-process windows, the check runs on its own again", async () => {
    const t = await instance();
    await connect(t, "dave", 5);
    expect((await t.chat("dave")).status).toBe(200);
    const limiter = t.deps.rateLimiter as FallbackRateLimiter;
    const primary = limiter.primary as PostgresRateLimiter;
    const check = primary.check.bind(primary);
    primary.check = async () => {
      throw new Error("simulated outage");
    };
    await limiter.check({ name: "chat", limit: LIMIT, windowMs: 60_000 }, "someone-else");
    t.statements.length = 0;
    // The degraded limiter answers from memory; the call itself still reserves in PostgreSQL, without a check.
    expect((await t.chat("dave")).status).toBe(200);
    expect(limiter.state.degraded).toBe(true);
    expect(t.statements.filter((s) => s.includes("budget_reserve_durable"))).toHaveLength(1);
    expect(await hitsOf(t.store, t.appId, "dave")).toBe(1);
    primary.check = check;
    // Back: the next call's own check reaches PostgreSQL, and the one after is folded again.
    expect((await t.chat("dave")).status).toBe(200);
    expect(limiter.state.degraded).toBe(false);
    expect((await t.chat("dave")).status).toBe(200);
    expect(await hitsOf(t.store, t.appId, "dave")).toBe(3);
  });

  test("30 calls at once from three instances on a limit of 5: exactly 5 answered, the rest 429 with nothing reserved", async () => {
    const a = await instance();
    const others = [await instance(a.appId, a.secretKey), await instance(a.appId, a.secretKey)];
    await connect(a, "erin", 5);
    const all = [a, ...others];
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => all[i % 3]!.chat("erin")));
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(LIMIT);
    expect(statuses.filter((s) => s === 429)).toHaveLength(30 - LIMIT);
    for (const i of all) await i.idle();
    expect(await reservationsLeft(a.store)).toBe(0);
    expect(await hitsOf(a.store, a.appId, "erin")).toBe(LIMIT);
  });
});

describe("budget_reserve_limited_many, one batch", () => {
  test("checked and unchecked reserves, refused by limit or by budget, each as if taken alone", async () => {
    const store = await openPostgresStore(url, { poolSize: 4 });
    stores.push(store);
    const now = Date.UTC(2026, 0, 15, 12);
    const limiter = new PostgresRateLimiter(store.database, () => now);
    const ledger = new PostgresBudgetLedger(store.database, memoryLogger(), limiter);
    await ledger.start();
    const rule = { name: "batch", limit: 3, windowMs: 60_000 };
    const cap = 1_000_000;
    const calls = [
      // Occupies the batcher, so that the rest queue and go as one batch.
      ledger.reserve("acct-x", "r-0", cap, 10, 10),
      ...Array.from({ length: 5 }, (_, i) => ledger.reserve("acct-a", `a-${i}`, cap, 100, 100, { rule, key: "k-a" })),
      ledger.reserve("acct-b", "b-0", cap, 100, 100),
      ledger.reserve("acct-b", "b-1", cap, 100, 100),
      ledger.reserve("acct-c", "c-0", 50, 100, 100, { rule, key: "k-c" }),
      ledger.reserve("acct-a", "a-5", cap, 100, 100, { rule, key: "k-other" }),
    ];
    const outcomes = await Promise.all(calls);
    const limited = outcomes.slice(1, 6);
    expect(limited.map((o) => o.ok)).toEqual([true, true, true, false, false]);
    expect(limited.map((o) => o.rateLimit?.allowed)).toEqual([true, true, true, false, false]);
    expect(limited.map((o) => o.rateLimit?.remaining)).toEqual([2, 1, 0, 0, 0]);
    for (const o of limited.slice(3)) {
      expect(o.rateLimit!.resetMs).toBeGreaterThan(0);
      expect(o).toMatchObject({ ok: false, spentNano: 0, reservedNano: 0 });
    }
    expect(outcomes[0]).toEqual({ ok: true, grantedNano: 10 });
    expect(outcomes[6]).toEqual({ ok: true, grantedNano: 100 });
    expect(outcomes[7]).toEqual({ ok: true, grantedNano: 100 });
    // Allowed by its limit, refused by its budget: the hit counts, nothing is reserved.
    expect(outcomes[8]).toMatchObject({ ok: false, rateLimit: { allowed: true, remaining: 2, limit: 3 } });
    expect(outcomes[9]).toMatchObject({ ok: true, grantedNano: 100, rateLimit: { allowed: true, remaining: 2 } });
    const [held] = await store.database.run(
      (sql) => sql`SELECT count(*)::int AS n, sum(amount_nano)::bigint AS total FROM budget_reservations WHERE instance_id = ${ledger.instanceId}`,
    );
    expect(Number(held.n)).toBe(1 + 3 + 2 + 1);
    expect(Number(held.total)).toBe(10 + 300 + 200 + 100);
    const hits = await store.database.run((sql) => sql`SELECT key, count(*)::int AS n FROM rate_limit_hits WHERE key LIKE 'batch:%' GROUP BY key ORDER BY key`);
    expect(hits.map((h: { key: string; n: number }) => [h.key, Number(h.n)])).toEqual([
      ["batch:k-a", 3],
      ["batch:k-c", 1],
      ["batch:k-other", 1],
    ]);
    await ledger.close();
  });
});
