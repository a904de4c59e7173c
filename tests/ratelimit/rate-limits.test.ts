import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Redis from "ioredis";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";
import { startRedis, type TestRedis } from "../helpers/redis";

const json = async (r: Response): Promise<any> => r.json();
const ask = { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 5 };

function session(t: ChatTestApp, appUserId = "alice", secretKey = t.secretKey) {
  return t.app.handle(
    new Request("http://localhost/api/v1/sessions", {
      method: "POST",
      headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/json" },
      body: JSON.stringify({ appUserId }),
    }),
  );
}

async function countStatuses(responses: Response[]): Promise<Record<number, number>> {
  const counts: Record<number, number> = {};
  for (const r of responses) counts[r.status] = (counts[r.status] ?? 0) + 1;
  await Promise.all(responses.map((r) => r.arrayBuffer()));
  return counts;
}

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis.stop();
});

for (const mode of ["memory", "redis"] as const) {
  describe(`rate limits (${mode})`, () => {
    const env = (extra: Record<string, string> = {}) => (mode === "redis" ? { REDIS_URL: redis.url, ...extra } : extra);

    test("RL_CHAT: 31 requests → exactly 30 admitted and one 429 with Retry-After; others unaffected", async () => {
      const t = await chatTestApp({ env: env() });
      await t.connect("alice", 5);
      await t.connect("bob", 5);
      const responses: Response[] = [];
      for (let i = 0; i < 31; i++) responses.push(await t.chat(ask));
      expect(await countStatuses(responses.slice(0, 30))).toEqual({ 200: 30 });
      const limited = responses[30]!;
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(limited.headers.get("ratelimit-limit")).toBe("30");
      expect(limited.headers.get("ratelimit-remaining")).toBe("0");
      expect(responses[0]!.headers.get("ratelimit-remaining")).toBe("29");
      expect(Number(responses[0]!.headers.get("ratelimit-reset"))).toBeGreaterThanOrEqual(1);
      expect((await json(limited)).error.code).toBe("rate_limited");
      // Another user of the same app, and another app, are unaffected.
      expect((await t.chat(ask, { "x-service-user": "bob" })).status).toBe(200);
      const other = await chatTestApp({ env: env() });
      await other.connect("alice", 5);
      expect((await other.chat(ask)).status).toBe(200);
    });

    test("RL_SESSIONS: 121 session requests → exactly 120 admitted; another app unaffected", async () => {
      const t = await chatTestApp({ env: env() });
      const responses = await Promise.all(Array.from({ length: 121 }, (_, i) => session(t, `u${i}`)));
      expect(await countStatuses(responses)).toEqual({ 200: 120, 429: 1 });
      const other = await chatTestApp({ env: env() });
      expect((await session(other)).status).toBe(200);
      expect(t.logs.some((l) => l.includes("falling back"))).toBe(false);
    });
  });
}

test("memory: admitted again once the window has passed (manual clock)", async () => {
  const t = await chatTestApp();
  await t.connect("alice", 5);
  for (let i = 0; i < 30; i++) await (await t.chat(ask)).arrayBuffer();
  const limited = await t.chat(ask);
  expect(limited.status).toBe(429);
  t.clock.advance(Number(limited.headers.get("retry-after")) * 1000);
  expect((await t.chat(ask)).status).toBe(200);
});

test("redis: admitted again once the window has passed (Redis clock, bounded polling)", async () => {
  const t = await chatTestApp({ env: { REDIS_URL: redis.url, RL_CHAT_LIMIT: "2", RL_CHAT_WINDOW_SECONDS: "1" } });
  await t.connect("carol", 5);
  const as = { "x-service-user": "carol" };
  expect((await t.chat(ask, as)).status).toBe(200);
  expect((await t.chat(ask, as)).status).toBe(200);
  expect((await t.chat(ask, as)).status).toBe(429);
  let status = 429;
  for (let i = 0; i < 100 && status === 429; i++) {
    await Bun.sleep(50);
    status = (await t.chat(ask, as)).status;
  }
  expect(status).toBe(200);
});

test("redis: the script is re-loaded after SCRIPT FLUSH (NOSCRIPT)", async () => {
  const t = await chatTestApp({ env: { REDIS_URL: redis.url } });
  await t.connect("dave", 5);
  expect((await t.chat(ask, { "x-service-user": "dave" })).status).toBe(200);
  const admin = new Redis(redis.url);
  await admin.script("FLUSH");
  admin.disconnect();
  expect((await t.chat(ask, { "x-service-user": "dave" })).status).toBe(200);
  expect(t.logs.some((l) => l.includes("falling back"))).toBe(false);
});
