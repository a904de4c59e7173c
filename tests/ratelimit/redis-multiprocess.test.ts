/**
 * Issue 4, "What it must show", with real processes: two proxy servers sharing one Redis,
 * one SQLite file and one mock upstream (tests/helpers/cluster.ts). Requests alternate
 * between the two processes, so a per-process limiter or ledger would visibly fail.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { userAccount } from "../../src/budget/accounts";
import { periodAt } from "../../src/money";
import { pollUntil, startCluster, type Cluster } from "../helpers/cluster";

type Json = any;

function tally(statuses: number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const s of statuses) counts[s] = (counts[s] ?? 0) + 1;
  return counts;
}

describe("RL_CHAT across two processes sharing Redis", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster();
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  test("200 simultaneous requests for one app+user → exactly 30 admitted, 170 × 429 rate_limited", async () => {
    // A large cap and a tiny completion: the budget never refuses anything here.
    await cluster.connect("alice", 100);
    const ask = { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi [[mock tokens=2]]" }], max_tokens: 4 };
    const responses = await Promise.all(Array.from({ length: 200 }, (_, i) => cluster.chat(cluster.pick(i), "alice", ask)));
    const bodies: Json[] = await Promise.all(responses.map((r) => r.json()));
    expect(tally(responses.map((r) => r.status))).toEqual({ 200: 30, 429: 170 });
    responses.forEach((r, i) => {
      if (r.status === 200) {
        expect(bodies[i].object).toBe("chat.completion");
        return;
      }
      expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(Number.isInteger(Number(r.headers.get("retry-after")))).toBe(true);
      expect(r.headers.get("ratelimit-limit")).toBe("30");
      expect(r.headers.get("ratelimit-remaining")).toBe("0");
      expect(bodies[i].error.code).toBe("rate_limited");
    });
    // Both processes answered, and neither fell back to its in-process limiter (which would
    // have admitted up to 30 per process).
    for (const server of cluster.servers) {
      const health = await cluster.health(server);
      expect(health.limiter).toMatchObject({ kind: "redis", degraded: false });
      expect(health.budget.kind).toBe("redis");
    }
    // Another user of the same app is unaffected, on either process.
    await cluster.connect("bob", 100, cluster.servers[1]);
    for (const server of cluster.servers) expect((await cluster.chat(server, "bob", ask)).status).toBe(200);
  });
});

describe("the hard cap across two processes sharing Redis", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    // Rate limiting must not interfere: only the budget may refuse.
    cluster = await startCluster({ env: { RL_CHAT_LIMIT: "1000" } });
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  test("a $0.05 cap, 100 concurrent requests (JSON and SSE) split across them: metered total ≤ cap", async () => {
    const capUsd = 0.05;
    const capNano = 50_000_000;
    await cluster.connect("carol", capUsd);
    // gpt-4o: $10 per million completion tokens. 400 completion tokens cost $0.004, so the
    // cap covers about a dozen of the hundred; the rest must be refused.
    const ask = (stream: boolean) => ({
      model: "openai/gpt-4o",
      messages: [{ role: "user", content: "Tell me a long story. [[mock tokens=400]]" }],
      max_tokens: 400,
      stream,
    });
    const responses = await Promise.all(Array.from({ length: 100 }, (_, i) => cluster.chat(cluster.pick(i), "carol", ask(i % 4 < 2))));
    // Read every body in full: a stream is settled when it ends.
    const texts = await Promise.all(responses.map((r) => r.text()));
    const statuses = responses.map((r) => r.status);
    const admitted = statuses.filter((s) => s === 200).length;
    const refused = statuses.filter((s) => s === 402).length;
    expect(admitted + refused).toBe(100);
    expect(admitted).toBeGreaterThan(0);
    expect(refused).toBeGreaterThanOrEqual(50);
    responses.forEach((r, i) => {
      if (r.status === 200) return;
      const body: Json = JSON.parse(texts[i]!);
      expect(body.error.code).toBe("budget_exceeded");
      expect(body.error.limitUsd).toBe(capUsd);
      expect(body.error.remainingUsd).toBeLessThanOrEqual(capUsd);
    });
    // An admitted stream ran to its end; an admitted JSON request is a chat.completion.
    const isStream = (r: Response) => (r.headers.get("content-type") ?? "").includes("text/event-stream");
    const streamedAdmitted = responses.filter((r, i) => r.status === 200 && isStream(r) && texts[i]!.includes("data: [DONE]")).length;
    const jsonAdmitted = responses.filter((r, i) => r.status === 200 && !isStream(r) && JSON.parse(texts[i]!).object === "chat.completion").length;
    expect(streamedAdmitted + jsonAdmitted).toBe(admitted);

    // Every admitted request has exactly one ledger row, once both processes have flushed.
    const rows = await pollUntil("a ledger row per admitted request", async () => {
      const found = cluster.ledger("carol");
      return found.length >= admitted ? found : undefined;
    });
    await cluster.waitForFlush();
    expect(rows).toHaveLength(admitted);
    expect(rows.every((r) => r.status === "ok" && r.cost_nano > 0)).toBe(true);
    expect(rows.filter((r) => r.streamed === 1)).toHaveLength(streamedAdmitted);
    const meteredNano = rows.reduce((sum, r) => sum + r.cost_nano, 0);
    expect(meteredNano).toBeLessThanOrEqual(capNano);
    const account = userAccount(cluster.appId, periodAt(Date.now()).id, "carol");
    expect(cluster.totalNano(account)).toBe(meteredNano);

    // /status on either process shows the ledger's sum as usage, and nothing still reserved.
    for (const server of cluster.servers) {
      const status = await cluster.status(server, "carol");
      expect(Math.round(status.usage.monthlyUsd * 1e9)).toBe(meteredNano);
      expect(Math.round(status.remainingUsd * 1e9)).toBe(capNano - meteredNano);
    }
    // The limiter stayed on Redis throughout (no per-process fallback).
    for (const server of cluster.servers) expect((await cluster.health(server)).limiter.degraded).toBe(false);
  });
});
