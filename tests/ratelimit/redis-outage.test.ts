/**
 * Issue 4, "Redis trouble", with real processes: Redis is stopped in the middle of a load
 * run against two proxy processes, then started again empty. Rate limiting falls back and
 * keeps serving (never a 5xx); budgets fail closed (503 `unavailable`); /healthz shows the
 * limiter degraded; when Redis is back, service resumes without restarting the proxies,
 * and the lost budget counters are rebuilt from the store before anything is admitted.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { userAccount } from "../../src/budget/accounts";
import { periodAt } from "../../src/money";
import { OPERATOR_AUTH, pollUntil, startCluster, type Cluster } from "../helpers/cluster";

type Json = any;

/** A cheap request: the budget of `loader` never binds. */
const cheap = { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "ping [[mock tokens=3]]" }], max_tokens: 8 };
/** About $0.003 each (gpt-4o, 300 completion tokens): a $0.01 cap affords three and a bit. */
const costly = { model: "openai/gpt-4o", messages: [{ role: "user", content: "Write at length. [[mock tokens=300]]" }], max_tokens: 300 };
const SESSIONS_LIMIT = 40;

let cluster: Cluster;
beforeAll(async () => {
  cluster = await startCluster({ env: { RL_CHAT_LIMIT: "1000", RL_SESSIONS_LIMIT: String(SESSIONS_LIMIT) } });
});
afterAll(async () => {
  await cluster?.stop();
});

interface Sample {
  route: "sessions" | "chat";
  status: number;
  code: string | null;
}

async function sample(route: Sample["route"], response: Promise<Response>): Promise<Sample> {
  const res = await response;
  const body: Json = await res.json();
  return { route, status: res.status, code: body?.error?.code ?? null };
}

test("Redis stopped during a load run, then started again empty", async () => {
  const [a, b] = cluster.servers;
  const period = periodAt(Date.now()).id;
  await cluster.connect("loader", 10, a);
  await cluster.connect("spender", 0.01, b);

  // Before the outage: "spender" spends most of a $0.01 cap, alternating processes, until refused.
  const before: number[] = [];
  for (let i = 0; i < 20 && before.at(-1) !== 402; i++) {
    const res = await cluster.chat(cluster.pick(i), "spender", costly);
    await res.arrayBuffer();
    before.push(res.status);
  }
  expect(before.at(-1)).toBe(402);
  expect(before.filter((s) => s === 200).length).toBeGreaterThanOrEqual(3);
  // The spend is durable only once flushed; the rebuild after data loss reads it from SQLite.
  await cluster.waitForFlush();
  const spenderAccount = userAccount(cluster.appId, period, "spender");
  const spentNano = cluster.totalNano(spenderAccount);
  expect(spentNano).toBeGreaterThan(5_000_000);
  expect(spentNano).toBeLessThanOrEqual(10_000_000);
  expect(Math.round((await cluster.status(a, "spender")).usage.monthlyUsd * 1e9)).toBe(spentNano);

  // The load run: a session and a chat request per round, alternating processes. Redis is
  // stopped while it runs; the run ends itself a few rounds into the outage (once chat has
  // failed closed 5 times), so the outage rounds stay far below the per-process fallback's
  // sessions limit, which the burst below relies on. Bounded: 2000 rounds at most.
  const samples: Sample[] = [];
  const chatSamples = () => samples.filter((s) => s.route === "chat");
  let failedClosed = 0;
  const load = (async () => {
    for (let i = 0; i < 2000 && failedClosed < 5; i++) {
      const via = cluster.pick(i);
      const round = await Promise.all([sample("sessions", cluster.session(via, `load-${i}`)), sample("chat", cluster.chat(via, "loader", cheap))]);
      samples.push(...round);
      if (round[1].status === 503) failedClosed++;
    }
  })();
  await pollUntil("the load run to be under way", async () => (chatSamples().filter((s) => s.status === 200).length >= 10 ? true : undefined));
  await cluster.redis.stop();
  await load;
  expect(failedClosed).toBe(5);

  // Throughout the run: the rate-limited route never answered 5xx; chat only 200 or 503.
  expect(samples.filter((s) => s.route === "sessions").every((s) => s.status === 200 || s.status === 429)).toBe(true);
  for (const s of chatSamples()) {
    expect([200, 503]).toContain(s.status);
    if (s.status === 503) expect(s.code).toBe("unavailable");
  }

  // While Redis is down: sessions still rate-limited (per process, in-process fallback), never 5xx.
  const burst = await Promise.all(Array.from({ length: 100 }, (_, i) => sample("sessions", cluster.session(cluster.pick(i), `burst-${i}`))));
  const burstStatuses = new Set(burst.map((s) => s.status));
  expect([...burstStatuses].sort()).toEqual([200, 429]);
  for (const s of burst) if (s.status === 429) expect(s.code).toBe("rate_limited");
  // Chat fails closed on both processes, for every user: never an unmetered pass.
  const down = await Promise.all(
    Array.from({ length: 20 }, (_, i) => sample("chat", cluster.chat(cluster.pick(i), i % 2 === 0 ? "loader" : "spender", cheap))),
  );
  for (const s of down) expect(s).toEqual({ route: "chat", status: 503, code: "unavailable" });
  // /healthz: still 200 (the service serves), with the limiter shown degraded.
  for (const server of cluster.servers) {
    const res = await server.fetch("/healthz", { headers: OPERATOR_AUTH });
    expect(res.status).toBe(200);
    const health: Json = await res.json();
    expect(health.limiter.degraded).toBe(true);
    expect(typeof health.limiter.since).toBe("string");
    expect(typeof health.limiter.lastError).toBe("string");
  }
  // Whatever was metered during the transition is durable before Redis comes back empty.
  await cluster.waitForFlush();

  // Redis again, empty. Same proxy processes: each resumes by itself.
  await cluster.redis.start();
  for (const server of cluster.servers) {
    // Until a chat call succeeds and a rate-limit check after it has reached Redis: the
    // first call back may have been limited in-process while the connection was still
    // coming up (its reserve reached Redis a moment later), and the limiter stays degraded
    // until a check of its own succeeds.
    await pollUntil(`chat on ${server.baseUrl} to succeed again, limited through Redis`, async () => {
      const res = await cluster.chat(server, "loader", cheap);
      await res.arrayBuffer();
      return res.status === 200 && !(await cluster.health(server)).limiter.degraded ? true : undefined;
    });
  }
  for (const server of cluster.servers) {
    expect((await cluster.health(server)).limiter).toMatchObject({ kind: "redis", degraded: false, since: null });
    expect((await cluster.session(server, "after-restart")).status).toBe(200);
  }
  expect(a.proc.exitCode).toBeNull();
  expect(b.proc.exitCode).toBeNull();

  // The counters were rebuilt from the store, not restarted at zero: spender stays refused.
  for (const server of cluster.servers) {
    const res = await cluster.chat(server, "spender", costly);
    const body: Json = await res.json();
    expect(res.status).toBe(402);
    expect(body.error.code).toBe("budget_exceeded");
    expect(Math.round(body.error.usedUsd * 1e9)).toBe(spentNano);
    expect(Math.round((await cluster.status(server, "spender")).usage.monthlyUsd * 1e9)).toBe(spentNano);
  }
  const admin = cluster.redis.client();
  try {
    expect(await admin.hget(`bl:${spenderAccount}`, "spent")).toBe(String(spentNano));
  } finally {
    admin.disconnect();
  }
  // And the loader's live counter agrees with its durable total once everything is flushed.
  await cluster.waitForFlush();
  const loaderTotal = cluster.totalNano(userAccount(cluster.appId, period, "loader"));
  expect(loaderTotal).toBeGreaterThan(0);
  for (const server of cluster.servers) {
    expect(Math.round((await cluster.status(server, "loader")).usage.monthlyUsd * 1e9)).toBe(loaderTotal);
  }
});
