/**
 * PostgreSQL stopped and started under load, three instances, without and with Redis: while it is
 * down, chat calls fail closed (503 `unavailable`) and /healthz says so; once it is back,
 * the same processes serve again (no restart), and every call that was answered 200 has
 * its ledger row, with totals equal to the rows. Also: a key revoked with the CLI on the
 * shared database stops working on every instance (the change feed drops their caches).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { pollUntil } from "../helpers/cluster";
import { shortChat, startPgCluster, type PgCluster } from "../helpers/pg-cluster";
import { runCli } from "../helpers/server";

const ask = shortChat;

describe.each([
  ["without Redis", false],
  ["with Redis", true],
])("PostgreSQL outage under load (three instances, %s)", (_label, withRedis) => {
  let cluster: PgCluster;
  beforeAll(async () => {
    cluster = await startPgCluster({ instances: 3, redis: withRedis, env: { RL_CHAT_LIMIT: "100000", DATABASE_TIMEOUT_MS: "1000" } });
    await cluster.connect("olga", 10);
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  test("fails closed while down, recovers without a restart, loses no row of an answered call", async () => {
    const answered: string[] = [];
    const statuses = new Map<number, number>();
    let phase: "before" | "down" | "after" = "before";
    let stop = false;
    const worker = async (w: number) => {
      for (let i = 0; !stop; i++) {
        const res = await cluster.chat(cluster.pick(w + i), "olga", ask(i % 2 === 0));
        const text = await res.text();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 200 && (!text.startsWith("data:") || text.includes("[DONE]"))) answered.push(res.headers.get("x-request-id")!);
        else if (res.status !== 503)
          throw new Error(
            `unexpected ${res.status} in phase ${phase}: ${text}\n${cluster.servers.flatMap((s) => s.stdout.filter((l) => l.includes("error"))).join("\n")}`,
          );
        else expect(JSON.parse(text).error.code).toBe("unavailable");
      }
    };
    const workers = Promise.all([0, 1, 2, 3].map(worker));
    await pollUntil("calls served before the outage", async () => (answered.length >= 20 ? true : undefined));

    phase = "down";
    await cluster.postgres.stop();
    const down = await pollUntil("a 503 from every instance", async () => {
      const results = await Promise.all(cluster.servers.map((s) => cluster.chat(s, "olga", ask(false))));
      // With Redis, calls can still succeed until an instance notices the store is gone.
      for (const r of results) if (r.status === 200) answered.push(r.headers.get("x-request-id")!);
      return results.every((r) => r.status === 503) ? results : undefined;
    });
    expect(((await down[0]!.json()) as { error: { code: string } }).error.code).toBe("unavailable");
    for (const server of cluster.servers) {
      const res = await server.fetch("/healthz");
      expect(res.status).toBe(503);
      const health = (await res.json()) as { status: string; store: unknown; budget: { ok: boolean } };
      expect(health.status).toBe("degraded");
      expect(health.store).toEqual({ kind: "postgres", ok: false });
      // Without Redis the budgets are in the database, so they are down with it; with Redis
      // the counters are up, but every call still fails closed on the store.
      expect(health.budget.ok).toBe(withRedis);
    }

    phase = "after";
    await cluster.postgres.start();
    const servedBefore = answered.length;
    await pollUntil("every instance serving again", async () => {
      const results = await Promise.all(cluster.servers.map((s) => cluster.chat(s, "olga", ask(false))));
      for (const r of results) if (r.status === 200) answered.push(r.headers.get("x-request-id")!);
      return results.every((r) => r.status === 200) ? true : undefined;
    });
    await pollUntil("more calls served after the outage", async () => (answered.length >= servedBefore + 20 ? true : undefined));
    stop = true;
    await workers;
    expect(statuses.get(503) ?? 0).toBeGreaterThan(0);

    // Every answered call has its row (settles that failed during the outage were retried).
    const rows = await pollUntil("a row for every answered call", async () => {
      const found = new Set((await cluster.ledger("olga")).map((r) => r.request_id));
      return answered.every((id) => found.has(id)) ? found : undefined;
    });
    expect(rows.size).toBe(answered.length);
    // Totals equal the rows, and nothing stays reserved: a call refused during the outage
    // gives its reservation back once the database takes the release (retried each second).
    const mismatched = () => cluster.sql`
      SELECT t.account FROM usage_totals t LEFT JOIN (SELECT account, sum(cost_nano) AS s, count(*) AS n FROM usage_ledger GROUP BY account) l USING (account)
      WHERE t.spent_nano <> COALESCE(l.s, 0) OR t.request_count <> COALESCE(l.n, 0) OR t.reserved_nano <> 0`;
    await pollUntil("totals equal to the rows, nothing reserved", async () => ((await mismatched()).length === 0 ? true : undefined)).catch(() => {});
    expect(await mismatched()).toEqual([]);
    for (const server of cluster.servers) expect((await cluster.health(server)).status).toBe("ok");
    // And every instance's /status equals the rows (the Redis counters too, with Redis).
    const metered = (await cluster.ledger("olga")).reduce((sum, r) => sum + r.cost_nano, 0);
    // The ledger is the upstream's bill: no call is charged more than the upstream billed.
    const billedNano = Math.round(cluster.billedUsd() * 1e9);
    expect(Math.abs(metered - billedNano)).toBeLessThanOrEqual(billedNano * 0.01);
    await pollUntil("every /status equal to the rows", async () => {
      for (const server of cluster.servers) {
        const status = await cluster.status(server, "olga");
        if (Math.round(status.usage.monthlyUsd * 1e9) !== metered || Math.round(status.remainingUsd * 1e9) !== 10e9 - metered) return undefined;
      }
      return true;
    });
  });

  test("a key revoked with the CLI stops working on every instance", async () => {
    const headers = { authorization: `Bearer ${cluster.secretKey}` };
    // Both instances have the key cached from the calls above.
    for (const server of cluster.servers) expect((await server.fetch("/api/v1/status?appUserId=olga", { headers })).status).toBe(200);
    const keyId = (await runCli(cluster.databaseUrl, "app", "list")).json[0]!.keys[0].keyId;
    expect((await runCli(cluster.databaseUrl, "key", "revoke", "--app", cluster.appId, "--key", keyId)).code).toBe(0);
    const revokedAt = Date.now();
    await pollUntil(
      "the revoked key refused on every instance",
      async () => {
        const codes = await Promise.all(cluster.servers.map(async (s) => (await s.fetch("/api/v1/status?appUserId=olga", { headers })).status));
        return codes.every((c) => c === 401) ? true : undefined;
      },
      20,
    );
    // Reported, not asserted: tests do not depend on timing.
    console.log(`revoked key refused on every instance ${Date.now() - revokedAt} ms after the CLI exited`);
  });
});
