/**
 * PostgreSQL stopped for longer than an instance's lease (5 s) while calls are upstream,
 * three instances without Redis: the calls finish upstream during the outage, their
 * settles wait for the database, and every instance's lease lapses though none died. Once the
 * database is back the ledger is the upstream's bill: a call whose usage was seen is charged
 * that usage (its instance's retried settle), not its reservation (a reconciler of another
 * instance taking it for a dead one's), and nothing stays held.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { pollUntil } from "../helpers/cluster";
import { startPgCluster, type PgCluster } from "../helpers/pg-cluster";

/** A JSON call the upstream answers after a second: upstream when the database stops. */
const slowCall = (stream: boolean) => ({
  model: "openai/gpt-4o-mini",
  messages: [{ role: "user", content: "hi [[mock tokens=30 delay_ms=1000]]" }],
  max_tokens: 400,
  stream,
});
const IN_FLIGHT = 24;

let cluster: PgCluster;
beforeAll(async () => {
  cluster = await startPgCluster({ instances: 3, env: { RL_CHAT_LIMIT: "100000", DATABASE_TIMEOUT_MS: "1000", RECONCILE_POLL_MS: "200" } });
  await cluster.connect("nia", 10);
});
afterAll(async () => {
  await cluster?.stop();
});

test("calls upstream through a 6 s outage are charged what the upstream billed, not their reservations", async () => {
  const calls = Array.from({ length: IN_FLIGHT }, async (_, i) => {
    const res = await cluster.chat(cluster.pick(i), "nia", slowCall(i % 2 === 1));
    return { status: res.status, body: await res.text() };
  });
  const journaled = async () => Number((await cluster.sql`SELECT count(*) AS n FROM call_journal WHERE app_user_id = 'nia'`)[0].n);
  await pollUntil("the calls journaled", async () => ((await journaled()) === IN_FLIGHT ? true : undefined), 5);
  await cluster.postgres.stop();
  // Longer than a lease: every instance's lapses while it waits for the database.
  await Bun.sleep(6000);
  await cluster.postgres.start();
  const answered = await Promise.all(calls);
  expect(answered.map((a) => a.status)).toEqual(Array.from({ length: IN_FLIGHT }, () => 200));

  const rows = await pollUntil("a row for every call, nothing left in the journal", async () => {
    const found = await cluster.ledger("nia");
    return found.length === IN_FLIGHT && (await journaled()) === 0 ? found : undefined;
  });
  const billedNano = Math.round(cluster.billedUsd() * 1e9);
  const ledgerNano = rows.reduce((sum, r) => sum + r.cost_nano, 0);
  // A call another instance took over meanwhile (its owner's lease lapsed) is settled from
  // the upstream's record when it has a generation id; none is charged its reservation.
  expect(await cluster.sql`SELECT request_id, status FROM usage_ledger WHERE app_user_id = 'nia' AND source = 'reservation'`).toEqual([]);
  expect(ledgerNano).toBe(billedNano);
  const status = await cluster.status(cluster.servers[0]!, "nia");
  expect(Math.round(status.remainingUsd * 1e9)).toBe(10e9 - ledgerNano);
});
