/**
 * With Redis, a chat call's rate limit runs inside its budget reservation (one script, one
 * round trip; src/http/rate-limit-macro.ts DeferredRateLimit). What must hold: one Redis script
 * per call touches the window, and it is the reservation; the limit still comes before the
 * budget; calls that never reach the reservation still count; while the limiter falls back
 * to its in-process windows, the check is made on its own again.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Redis from "ioredis";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";
import { startRedis, type TestRedis } from "../helpers/redis";
import { FallbackRateLimiter } from "../../src/ratelimit/fallback-rate-limiter";

const ask = { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 5 };
const LIMIT = "5";

let redis: TestRedis;
let client: Redis;
beforeAll(async () => {
  redis = await startRedis();
  client = new Redis(redis.url);
});
afterAll(async () => {
  client?.disconnect();
  await redis.stop();
});

/** The window of a user's chat calls, as the limiter names it. */
const windowKey = (t: ChatTestApp, user: string) => `rl:chat:${t.appId}:user:${user}`;

/** Every command clients send Redis while `work` runs, as argument lists (not those a script runs). */
async function commandsDuring(work: () => Promise<void>): Promise<string[][]> {
  const monitor = await client.monitor();
  const seen: string[][] = [];
  monitor.on("monitor", (_time: string, args: string[], source: string) => {
    if (!source.includes("lua")) seen.push(args);
  });
  await work();
  // MONITOR is asynchronous to the commands it reports: end with a marker and wait for it.
  const marker = `marker-${crypto.randomUUID()}`;
  await client.get(marker);
  for (let i = 0; i < 200 && !seen.some((args) => args.includes(marker)); i++) await Bun.sleep(10);
  monitor.disconnect();
  return seen;
}

async function waitForWindow(t: ChatTestApp, user: string, size: number): Promise<number> {
  let count = -1;
  for (let i = 0; i < 200; i++) {
    count = await client.zcard(windowKey(t, user));
    if (count >= size) break;
    await Bun.sleep(10);
  }
  return count;
}

describe("the chat rate limit folded into the Redis reservation", () => {
  test("one script per call touches the window, and it is the one that reserves", async () => {
    const t = await chatTestApp({ env: { REDIS_URL: redis.url, RL_CHAT_LIMIT: LIMIT } });
    await t.connect("alice", 5);
    await t.chat(ask); // loads the account into Redis first
    const commands = await commandsDuring(async () => {
      for (let i = 0; i < 3; i++) expect((await t.chat(ask)).status).toBe(200);
    });
    const touchingWindow = commands.filter((args) => args.includes(windowKey(t, "alice")));
    expect(touchingWindow).toHaveLength(3);
    for (const args of touchingWindow) {
      expect(args[0]?.toLowerCase()).toBe("fcall"); // a function of the budget library (src/store/redis/budget-library.ts)
      expect(args.some((arg) => arg.startsWith("bl:"))).toBe(true); // the budget account: the same script
    }
    // Nothing else carries a rate-limit key: no separate check.
    expect(commands.filter((args) => args.some((arg) => arg.startsWith("rl:"))).length).toBe(3);
  });

  test("the limit is counted and refused as before: the headers, then 429 with Retry-After before the budget is looked at", async () => {
    const t = await chatTestApp({ env: { REDIS_URL: redis.url, RL_CHAT_LIMIT: LIMIT } });
    await t.connect("alice", 5);
    const first = await t.chat(ask);
    expect(first.status).toBe(200);
    expect(first.headers.get("ratelimit-limit")).toBe(LIMIT);
    expect(first.headers.get("ratelimit-remaining")).toBe("4");
    for (let i = 0; i < 4; i++) expect((await t.chat(ask)).status).toBe(200);
    const limited = await t.chat(ask);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(limited.headers.get("ratelimit-remaining")).toBe("0");
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe("rate_limited");
    // Refused by its limit, nothing was reserved (the answered calls' reservations are settled).
    expect(await client.keys("br:*")).toEqual([]);
  });

  test("a call refused by its budget still counts, and carries the RateLimit headers", async () => {
    const t = await chatTestApp({ env: { REDIS_URL: redis.url, RL_CHAT_LIMIT: LIMIT } });
    await t.connect("alice", 0.000001);
    const refused = await t.chat(ask);
    expect(refused.status).toBe(402);
    expect(refused.headers.get("ratelimit-remaining")).toBe("4");
    expect(await client.zcard(windowKey(t, "alice"))).toBe(1);
  });

  test("calls that end before any reservation (no connection) still count toward the window", async () => {
    const t = await chatTestApp({ env: { REDIS_URL: redis.url, RL_CHAT_LIMIT: LIMIT } });
    for (let i = 0; i < 5; i++) expect((await t.chat(ask, { "x-service-user": "nobody" })).status).toBe(402);
    expect(await waitForWindow(t, "nobody", 5)).toBe(5);
    await t.connect("nobody", 5);
    expect((await t.chat(ask, { "x-service-user": "nobody" })).status).toBe(429);
  });

  test("while the limiter falls back to in-process windows, the check runs on its own again", async () => {
    const t = await chatTestApp({ env: { REDIS_URL: redis.url, RL_CHAT_LIMIT: LIMIT } });
    await t.connect("alice", 5);
    expect((await t.chat(ask)).status).toBe(200);
    const limiter = t.deps.rateLimiter as FallbackRateLimiter;
    // Make the shared limiter fail: one check of its own degrades it, as in a Redis outage.
    const primary = limiter.primary as { check: FallbackRateLimiter["check"] };
    const check = primary.check.bind(primary);
    primary.check = async () => {
      throw new Error("simulated outage");
    };
    await limiter.check({ name: "chat", limit: 5, windowMs: 60_000 }, "someone-else");
    const commands = await commandsDuring(async () => {
      // The degraded limiter answers from memory; the call itself still reserves in Redis.
      expect((await t.chat(ask)).status).toBe(200);
    });
    expect(limiter.state.degraded).toBe(true);
    expect(commands.filter((args) => args.includes(windowKey(t, "alice")))).toHaveLength(0);
    primary.check = check;
    // Back: the next call's own check reaches Redis, and the one after is folded again.
    expect((await t.chat(ask)).status).toBe(200);
    expect(limiter.state.degraded).toBe(false);
    expect((await t.chat(ask)).status).toBe(200);
    expect(await client.zcard(windowKey(t, "alice"))).toBe(3);
  });
});
