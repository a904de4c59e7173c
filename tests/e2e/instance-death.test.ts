/**
 * An instance dies with streams open (ARCHITECTURE.md §3 "The hard cap"): three proxy
 * processes on one PostgreSQL (without Redis, then with it) in front of a mock upstream that
 * bills as OpenRouter documents; one is SIGKILLed with 30 streams open on a provider that
 * cannot cancel, so the upstream bills each of them in full. The survivors settle the dead
 * instance's calls from the upstream's records of them: its reservations stay held until
 * then, the user's budget is spent to its cap and no further, and the ledger equals the
 * upstream's bill. No timing thresholds: waits poll for a state.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { pollUntil } from "../helpers/cluster";
import { startPgCluster, type PgCluster } from "../helpers/pg-cluster";

const CAP_USD = 0.02;
const CAP_NANO = 20_000_000;
// gpt-4o: $10 per million completion tokens. Each stream reserves 300 tokens ($0.003) and is
// billed in full at 60 tokens; the 30 open on the victim hold far more than the cap lets
// through, so most are refused, and the rest of the cap is spent on the survivors.
const stream = (pauseMs: number) => ({
  model: "openai/gpt-4o",
  messages: [{ role: "user", content: `A long one. [[mock tokens=60 pause_ms=${pauseMs} no_cancel]]` }],
  max_tokens: 300,
  stream: true,
});
const json = { model: "openai/gpt-4o", messages: [{ role: "user", content: "Short. [[mock tokens=60]]" }], max_tokens: 300 };

for (const withRedis of [false, true]) {
  describe(`an instance SIGKILLed with 30 streams open, on PostgreSQL${withRedis ? " and Redis" : ""}`, () => {
    let cluster: PgCluster;

    beforeAll(async () => {
      cluster = await startPgCluster({ redis: withRedis, env: { RECONCILE_POLL_MS: "100", RL_CHAT_LIMIT: "10000" } });
      await cluster.connect("dana", CAP_USD);
    });

    afterAll(async () => {
      await cluster?.stop();
    });

    test("its calls are charged at what the upstream billed; spend stops at the cap; the ledger equals the upstream's bill", async () => {
      const victim = cluster.servers[2]!;
      const opened = await Promise.all(Array.from({ length: 30 }, () => cluster.chat(victim, "dana", stream(50))));
      const admitted = opened.filter((r) => r.status === 200);
      for (const r of opened.filter((x) => x.status !== 200)) expect(r.status).toBe(402);
      expect(admitted.length).toBeGreaterThan(0);
      // Every admitted stream has begun (its first event is out) when the kill lands.
      const readers = admitted.map((r) => r.body!.getReader());
      await Promise.all(readers.map((reader) => reader.read()));
      victim.proc.kill("SIGKILL");
      await victim.proc.exited;
      for (const reader of readers) void reader.cancel().catch(() => {});
      cluster.servers.splice(2, 1);

      // The survivors settle the dead instance's calls; until then they stay held.
      await pollUntil("the dead instance's calls settled", async () => {
        const [open] = await cluster.sql`SELECT count(*)::int AS n FROM call_journal`;
        return open.n === 0 ? true : undefined;
      });
      const dead = await cluster.sql`SELECT source, status FROM usage_ledger WHERE status = 'instance_died'`;
      expect(dead.length).toBe(admitted.length);
      expect(dead.every((r: { source: string }) => r.source === "generation")).toBe(true);

      // The user spends on until refused: never past the cap, whatever the dead instance left.
      for (let i = 0; i < 40; i++) {
        const res = await cluster.chat(cluster.pick(i), "dana", json);
        await res.text();
        if (res.status === 402) break;
        expect(res.status).toBe(200);
      }
      const billedNano = Math.round(cluster.billedUsd() * 1e9);
      const ledger = (await cluster.ledger("dana")).reduce((sum, r) => sum + r.cost_nano, 0);
      expect(billedNano).toBeLessThanOrEqual(CAP_NANO);
      // The ledger equals the upstream's books (to rounding: nano-dollars, rounded up per call).
      expect(Math.abs(ledger - billedNano)).toBeLessThanOrEqual(cluster.upstream.mock.served.length);
      for (const server of cluster.servers) {
        const status = await cluster.status(server, "dana");
        expect(Math.round(status.usage.monthlyUsd * 1e9)).toBe(ledger);
        expect(Math.round(status.remainingUsd * 1e9)).toBe(CAP_NANO - ledger);
      }
      // Spent close to the cap: the dead instance's calls froze nobody below it.
      expect(ledger).toBeGreaterThan(CAP_NANO * 0.9);
    });
  });
}
