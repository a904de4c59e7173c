/**
 * Three proxy processes on one PostgreSQL (without Redis, then with it): the hard cap, the
 * chat rate limit and the ledger stay exact across instances, for one user and for many
 * users driven to their caps through two of them, and a SIGKILLed instance leaves no
 * reservation held and nothing counted twice. No timing thresholds: waits poll
 * for a state, bounded by POLL_BOUND_MS.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { pollUntil } from "../helpers/cluster";
import { startPgCluster, type PgCluster } from "../helpers/pg-cluster";

const CAP_USD = 0.05;
const CAP_NANO = 50_000_000;
/** Per user in the near-cap case: five of the costly calls, so every user reaches it in a few rounds. */
const NEAR_CAP_USD = 0.02;
const NEAR_CAP_NANO = 20_000_000;
/** A bound on that case's rounds, only ever reached when the cap stops refusing. */
const NEAR_CAP_MAX_ROUNDS = 12;
// gpt-4o: $10 per million completion tokens; 400 of them cost $0.004, so the cap covers
// about a dozen of a hundred calls and the rest must be refused.
const costly = (stream: boolean) => ({
  model: "openai/gpt-4o",
  messages: [{ role: "user", content: "Tell me a long story. [[mock tokens=400]]" }],
  max_tokens: 400,
  stream,
});
const cheap = (stream: boolean, directive = "") => ({
  model: "openai/gpt-4o-mini",
  messages: [{ role: "user", content: `hi [[mock tokens=4${directive}]]` }],
  max_tokens: 8,
  stream,
});

async function sumRows(cluster: PgCluster, user: string): Promise<number> {
  return (await cluster.ledger(user)).reduce((sum, r) => sum + r.cost_nano, 0);
}

/** Every instance's /status shows the ledger's sum as usage and nothing held. */
async function expectStatusEqualsRows(cluster: PgCluster, user: string, capNano: number): Promise<void> {
  const metered = await sumRows(cluster, user);
  for (const server of cluster.servers.filter((s) => s.proc.exitCode === null && s.proc.signalCode === null)) {
    const status = await cluster.status(server, user);
    expect(Math.round(status.usage.monthlyUsd * 1e9)).toBe(metered);
    expect(Math.round(status.remainingUsd * 1e9)).toBe(capNano - metered);
  }
}

describe.each([
  ["PostgreSQL only", false],
  ["PostgreSQL and Redis", true],
])("three instances on %s", (_label, withRedis) => {
  let cluster: PgCluster;
  /** The default chat rate limit (30 a minute per user), for the rate-limit case alone. */
  let limited: PgCluster;
  beforeAll(async () => {
    // Only the budget may refuse in the cap and SIGKILL cases.
    [cluster, limited] = await Promise.all([
      startPgCluster({ instances: 3, redis: withRedis, env: { RL_CHAT_LIMIT: "1000" } }),
      startPgCluster({ instances: 3, redis: withRedis }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([cluster?.stop(), limited?.stop()]);
  });

  test("a $0.05 cap, 100 concurrent calls (JSON and SSE) across the three: spend ≤ cap, one row per served call", async () => {
    await cluster.connect("carol", CAP_USD);
    const billedBefore = cluster.billedUsd();
    const responses = await Promise.all(Array.from({ length: 100 }, (_, i) => cluster.chat(cluster.pick(i), "carol", costly(i % 4 < 2))));
    const texts = await Promise.all(responses.map((r) => r.text()));
    const statuses = responses.map((r) => r.status);
    const admitted = statuses.filter((s) => s === 200).length;
    expect(statuses.filter((s) => s === 402).length).toBe(100 - admitted);
    expect(admitted).toBeGreaterThan(0);
    expect(admitted).toBeLessThan(50);
    responses.forEach((r, i) => {
      if (r.status === 402) expect(JSON.parse(texts[i]!).error.code).toBe("budget_exceeded");
    });

    const rows = await pollUntil("a ledger row per served call", async () => {
      const found = await cluster.ledger("carol");
      return found.length >= admitted ? found : undefined;
    });
    expect(rows).toHaveLength(admitted);
    const metered = rows.reduce((sum, r) => sum + r.cost_nano, 0);
    expect(metered).toBeLessThanOrEqual(CAP_NANO);
    // What the upstream itself billed for these calls is within the cap too, and equals the rows.
    const billedNano = Math.round((cluster.billedUsd() - billedBefore) * 1e9);
    expect(billedNano).toBeLessThanOrEqual(CAP_NANO);
    expect(Math.abs(billedNano - metered)).toBeLessThanOrEqual(admitted);
    await pollUntil("every instance's /status to equal the rows", async () => {
      await expectStatusEqualsRows(cluster, "carol", CAP_NANO);
      return true;
    });
  });

  test("eight users driven to their caps by calls spread over two of the instances: every spend ≤ its cap and within reach of it, one row per served call", async () => {
    const users = Array.from({ length: 8 }, (_, i) => `near-cap-${i}`);
    const two = cluster.servers.slice(0, 2);
    await Promise.all(users.map((user, i) => cluster.connect(user, NEAR_CAP_USD, two[i % 2])));
    const billedBefore = cluster.billedUsd();
    const served = new Map(users.map((user) => [user, 0]));
    let lastRefusal: Record<string, { remainingUsd: number }> = {};
    // Rounds of six simultaneous calls per user (JSON and SSE, alternating between the two
    // instances) until a round in which every call is refused. Each round starts with nothing
    // held, so that round's refusals mean no user can afford even a clamped call any more.
    for (let round = 1; ; round++) {
      expect(round).toBeLessThanOrEqual(NEAR_CAP_MAX_ROUNDS);
      await pollUntil("nothing held for any user, on every instance", async () => {
        for (const user of users) await expectStatusEqualsRows(cluster, user, NEAR_CAP_NANO);
        return true;
      });
      const calls = users.flatMap((user) => Array.from({ length: 6 }, (_, k) => ({ user, via: two[(k + round) % 2]!, stream: k % 2 === 0 })));
      const answers = await Promise.all(
        calls.map(async ({ user, via, stream }) => {
          const response = await cluster.chat(via, user, costly(stream));
          return { user, status: response.status, text: await response.text() };
        }),
      );
      for (const answer of answers) {
        expect([200, 402]).toContain(answer.status);
        if (answer.status === 200) served.set(answer.user, served.get(answer.user)! + 1);
        else {
          const error = JSON.parse(answer.text).error;
          expect(error.code).toBe("budget_exceeded");
          lastRefusal = { ...lastRefusal, [answer.user]: error };
        }
      }
      if (answers.every((a) => a.status === 402)) break;
    }

    let meteredAll = 0;
    for (const user of users) {
      const rows = await pollUntil(`${user}'s rows`, async () => {
        const found = await cluster.ledger(user);
        return found.length >= served.get(user)! ? found : undefined;
      });
      expect(rows).toHaveLength(served.get(user)!);
      const metered = rows.reduce((sum, r) => sum + r.cost_nano, 0);
      meteredAll += metered;
      expect(metered).toBeLessThanOrEqual(NEAR_CAP_NANO);
      // Close to the cap: what is left cannot pay for the prompt and a minimal completion,
      // a small fraction of one call's $0.004; and the refusal said exactly what is left.
      expect(NEAR_CAP_NANO - metered).toBeLessThan(NEAR_CAP_NANO / 20);
      expect(Math.round(lastRefusal[user]!.remainingUsd * 1e9)).toBe(NEAR_CAP_NANO - metered);
    }
    // The upstream billed what the ledger holds (to a nano-dollar of rounding per call).
    const billedNano = Math.round((cluster.billedUsd() - billedBefore) * 1e9);
    const servedAll = [...served.values()].reduce((a, b) => a + b, 0);
    expect(Math.abs(billedNano - meteredAll)).toBeLessThanOrEqual(servedAll);
    const mismatched = await cluster.sql`
      SELECT t.account FROM usage_totals t LEFT JOIN (SELECT account, sum(cost_nano) AS s, count(*) AS n FROM usage_ledger GROUP BY account) l USING (account)
      WHERE t.spent_nano <> COALESCE(l.s, 0) OR t.request_count <> COALESCE(l.n, 0)`;
    expect(mismatched).toEqual([]);
  });

  test("exactly 30 of 31 simultaneous chat calls for one user are admitted, spread over the three", async () => {
    await limited.connect("rita", 5);
    const responses = await Promise.all(Array.from({ length: 31 }, (_, i) => limited.chat(limited.pick(i), "rita", cheap(false))));
    await Promise.all(responses.map((r) => r.text()));
    expect(responses.filter((r) => r.status === 200)).toHaveLength(30);
    const refused = responses.filter((r) => r.status === 429);
    expect(refused).toHaveLength(1);
    expect(Number(refused[0]!.headers.get("retry-after"))).toBeGreaterThan(0);
    for (const server of limited.servers) expect((await limited.health(server)).limiter.degraded).toBe(false);
    await pollUntil("30 rows", async () => ((await limited.ledger("rita")).length === 30 ? true : undefined));
  });

  test("SIGKILL of one instance under load: no reservation stays held, nothing is counted twice", async () => {
    const users = ["kim", "lee", "max"];
    for (const user of users) await cluster.connect(user, 1);
    const victim = cluster.servers[2]!;
    // Slow streams on the victim hold reservations when the kill lands.
    const slow = users.map((user) =>
      cluster
        .chat(victim, user, cheap(true, " pause_ms=400"))
        .then((r) => r.text())
        .catch(() => "cut"),
    );
    const served: Response[] = [];
    let killed = false;
    const load = (async () => {
      for (let round = 0; round < 12; round++) {
        const batch = await Promise.all(
          users.map((user, i) =>
            cluster.chat(cluster.servers[(round + i) % 2]!, user, cheap(i % 2 === 0)).then(async (r) => {
              await r.text();
              return r;
            }),
          ),
        );
        served.push(...batch.filter((r) => r.status === 200));
        if (round === 4) {
          victim.proc.kill("SIGKILL");
          killed = true;
        }
      }
    })();
    await load;
    await Promise.all(slow);
    expect(killed).toBe(true);
    await victim.proc.exited;
    cluster.servers.splice(2, 1);
    await cluster.addServer();

    // Held amounts drain to zero once the survivors reclaim the dead instance's lease.
    await pollUntil("no reservation held for any of the users", async () => {
      for (const user of users) {
        const metered = await sumRows(cluster, user);
        for (const server of cluster.servers) {
          const status = await cluster.status(server, user);
          if (Math.round(status.usage.monthlyUsd * 1e9) !== metered) return undefined;
          if (Math.round(status.remainingUsd * 1e9) !== 1_000_000_000 - metered) return undefined;
        }
      }
      return true;
    });
    if (!withRedis) {
      const [held] =
        await cluster.sql`SELECT count(*)::int AS n, COALESCE(sum(reserved_nano), 0)::bigint AS reserved FROM usage_totals WHERE reserved_nano <> 0`;
      expect(held.n).toBe(0);
      const [open] = await cluster.sql`SELECT count(*)::int AS n FROM budget_reservations`;
      expect(open.n).toBe(0);
    }
    // Totals equal their rows, and every call served after the kill has its row.
    const mismatched = await cluster.sql`
      SELECT t.account FROM usage_totals t LEFT JOIN (SELECT account, sum(cost_nano) AS s, count(*) AS n FROM usage_ledger GROUP BY account) l USING (account)
      WHERE t.spent_nano <> COALESCE(l.s, 0) OR t.request_count <> COALESCE(l.n, 0)`;
    expect(mismatched).toEqual([]);
    const rowIds = new Set((await Promise.all(users.map((u) => cluster.ledger(u)))).flat().map((r) => r.request_id));
    const survivorsServed = served.filter((r) => !r.url.startsWith(victim.baseUrl));
    for (const r of survivorsServed) expect(rowIds.has(r.headers.get("x-request-id")!)).toBe(true);
  });
});
