/**
 * PostgreSQL crashing (`pg_ctl stop -m immediate`) while calls it has reserved for are
 * still upstream: a reservation and its journal entry were committed durably before their
 * call went upstream (ARCHITECTURE.md §3 "The hard cap"), so after recovery the journal
 * still lists them, the counters still hold them, and the calls admitted next fit in what is
 * really left.
 *
 * Before PostgreSQL migration 22 the reservations and journal entries committed without
 * waiting for their WAL; the crash lost them while their calls were still running upstream
 * (seen here: 1 and 3 of 10 entries left), and the calls after the restart were admitted
 * against budget already spent. The WAL writer here waits 10 s between flushes (the default
 * is 200 ms), so what a commit leaves unwritten stays unwritten until the crash, unless a
 * later commit that waits for the WAL writes it first: the crash follows the journal
 * entries at once.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { pollUntil } from "../helpers/cluster";
import { startPgCluster, type PgCluster } from "../helpers/pg-cluster";

/** A JSON call the upstream answers after 5 s: in flight while PostgreSQL crashes and recovers. */
const slowCall = {
  model: "openai/gpt-4o-mini",
  messages: [{ role: "user", content: "hi [[mock tokens=20 delay_ms=5000]]" }],
  max_tokens: 20,
};
const IN_FLIGHT = 10;

describe.each([
  ["PostgreSQL alone", false],
  ["PostgreSQL with Redis", true],
])("a PostgreSQL crash with calls in flight (%s)", (_label, withRedis) => {
  let cluster: PgCluster;
  beforeAll(async () => {
    cluster = await startPgCluster({
      instances: 1,
      redis: withRedis,
      postgres: { durableCommits: true, settings: ["wal_writer_delay=10000ms"] },
      env: { RL_CHAT_LIMIT: "100000", DATABASE_TIMEOUT_MS: "1000" },
    });
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  test("the journal and counters recovered from the WAL hold the calls still upstream: nothing is billed past the cap", async () => {
    const [server] = cluster.servers;
    // What one such call reserves, measured on a user of its own.
    await cluster.connect("probe", 10);
    const probe = await cluster.chat(server!, "probe", slowCall);
    const reservedUsd = Number(probe.headers.get("x-metering-reserved-usd"));
    await probe.text();
    expect(reservedUsd).toBeGreaterThan(0);
    // Room for the calls in flight and one and a half more.
    const capUsd = Number((reservedUsd * (IN_FLIGHT + 1.5)).toFixed(9));
    await cluster.connect("pia", capUsd);
    const billedBefore = cluster.billedUsd();

    const inFlight = Array.from({ length: IN_FLIGHT }, () => cluster.chat(server!, "pia", slowCall));
    // Once their reservations and journal entries are committed (and before any later commit
    // of the instance waits for the WAL, flushing theirs with it): PostgreSQL crashes.
    const journaled = async () => Number((await cluster.sql`SELECT count(*) AS n FROM call_journal WHERE app_user_id = 'pia'`)[0].n);
    await pollUntil("the calls in flight journaled", async () => ((await journaled()) === IN_FLIGHT ? true : undefined), 2);
    await cluster.postgres.crash();
    await cluster.postgres.start();
    // Recovered from the WAL: every call that went upstream is still journaled (and, without
    // Redis, still reserved in the database's own counters).
    expect(await pollUntil("the database answering again", journaled)).toBe(IN_FLIGHT);
    if (!withRedis) {
      const [held] = await cluster.sql`SELECT reserved_nano FROM usage_totals WHERE account LIKE ${`u/${cluster.appId}/%/pia`}`;
      expect(Number(held.reserved_nano) / 1e9).toBeCloseTo(reservedUsd * IN_FLIGHT, 6);
    }
    // Calls after the recovery, while the first ones still wait: only what is left is granted
    // (their max_tokens shrunk to it), then they are refused.
    const after = await pollUntil("the instance admitting or refusing again", async () => {
      const res = await cluster.chat(server!, "pia", slowCall);
      if (res.status === 503) return undefined;
      return res;
    });
    const later = [after, ...(await Promise.all(Array.from({ length: IN_FLIGHT }, () => cluster.chat(server!, "pia", slowCall))))];
    const first = await Promise.all(inFlight);
    expect(first.map((r) => r.status)).toEqual(Array.from({ length: IN_FLIGHT }, () => 200));
    await Promise.all([...first, ...later].map((r) => r.text()));
    const statuses = later.map((r) => r.status);
    expect(
      statuses.every((s) => s === 200 || s === 402),
      `statuses ${statuses}`,
    ).toBe(true);

    // The upstream's bill for pia within her cap, and her ledger equal to it.
    const rows = await pollUntil("a row for every call the upstream served", async () => {
      const found = await cluster.ledger("pia");
      return found.length >= IN_FLIGHT + statuses.filter((s) => s === 200).length ? found : undefined;
    });
    const billedUsd = cluster.billedUsd() - billedBefore;
    expect(billedUsd).toBeLessThanOrEqual(capUsd);
    const ledgerUsd = rows.reduce((sum, r) => sum + r.cost_nano, 0) / 1e9;
    expect(ledgerUsd).toBeCloseTo(billedUsd, 6);
  });
});
