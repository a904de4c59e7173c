/**
 * Redis losing the budget counters under load, three instances on PostgreSQL + Redis, as
 * operators' Redis really fails: killed (SIGKILL) and started again empty with 30 calls in
 * flight, flushed, and restarted from an older RDB snapshot (a restore from backup, or a
 * failover to a replica that lagged). The counters are rebuilt from the store's truth, the
 * ledger's settled spend plus the holds the call journal still lists, before any account
 * admits another call (ARCHITECTURE.md §3 "The hard cap"), so the upstream never bills past
 * the cap and the ledger equals its bill.
 *
 * Before the epoch check (src/store/redis/budget-scripts.ts) an account rebuilt after a loss
 * counted settled spend only: the 30 calls still upstream were admitted again, and real spend
 * reached 109–114 % of the cap; a restored snapshot's stale counters were trusted as they were.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { pollUntil } from "../helpers/cluster";
import { startPgCluster, type PgCluster } from "../helpers/pg-cluster";

/**
 * A JSON call the upstream answers after 1.5 s, long enough to be in flight through the fault,
 * whose cost is most of what it reserves (all of its max_tokens), so calls admitted twice show.
 */
const slowCall = {
  model: "openai/gpt-4o-mini",
  messages: [{ role: "user", content: "hi [[mock tokens=400 delay_ms=1500]]" }],
  max_tokens: 400,
};
const IN_FLIGHT = 30;

let cluster: PgCluster | undefined;
afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

async function start(snapshots = false): Promise<PgCluster> {
  cluster = await startPgCluster({ instances: 3, redis: snapshots ? { snapshots: true } : true, env: { RL_CHAT_LIMIT: "100000" } });
  return cluster;
}

/** What one such call reserves, measured on a user of its own (the mock's bill is read as a difference from here). */
async function reservationOf(c: PgCluster): Promise<number> {
  await c.connect("probe", 10);
  const probe = await c.chat(c.servers[0]!, "probe", slowCall);
  await probe.text();
  return Number(probe.headers.get("x-metering-reserved-usd"));
}

/** A call that waits out the outage: 503 while the counters are down, then its answer (200, or 402 at the cap). */
async function callThrough(c: PgCluster, i: number, user: string): Promise<number> {
  for (;;) {
    const res = await c.chat(c.pick(i), user, slowCall);
    await res.text();
    if (res.status !== 503) return res.status;
    await Bun.sleep(50);
  }
}

const journaled = async (c: PgCluster, user: string) => Number((await c.sql`SELECT count(*) AS n FROM call_journal WHERE app_user_id = ${user}`)[0].n);

/** The upstream's bill since `before` within the cap, the ledger equal to it, and every instance's /status equal to the ledger. */
async function expectHeld(c: PgCluster, user: string, capUsd: number, billedBefore: number, statuses: number[]): Promise<void> {
  expect(
    statuses.every((s) => s === 200 || s === 402),
    `statuses ${statuses}`,
  ).toBe(true);
  const served = statuses.filter((s) => s === 200).length;
  const rows = await pollUntil("a row for every call served", async () => {
    const found = await c.ledger(user);
    return found.length >= served ? found : undefined;
  });
  const billedUsd = c.billedUsd() - billedBefore;
  const ledgerNano = rows.reduce((sum, r) => sum + r.cost_nano, 0);
  expect(billedUsd).toBeLessThanOrEqual(capUsd);
  expect(Math.abs(ledgerNano / 1e9 - billedUsd)).toBeLessThanOrEqual(billedUsd * 0.01);
  // Nothing left held once every call has settled: no hold rebuilt from the journal stays behind to refuse calls later.
  const capNano = Math.round(capUsd * 1e9);
  await pollUntil("every instance's /status equal to the ledger, nothing held", async () => {
    for (const server of c.servers) {
      const status = await c.status(server, user);
      if (Math.round(status.usage.monthlyUsd * 1e9) !== ledgerNano || Math.round(status.remainingUsd * 1e9) !== capNano - ledgerNano) return undefined;
    }
    return true;
  });
}

describe("Redis losing its data with calls in flight (three instances on PostgreSQL + Redis)", () => {
  for (const [fault, lose] of [
    ["killed and restarted empty", (c: PgCluster) => c.redis!.kill().then(() => c.redis!.start())],
    [
      "flushed",
      async (c: PgCluster) => {
        const admin = c.redis!.client();
        await admin.flushall();
        admin.disconnect();
      },
    ],
  ] as const) {
    test(`${fault}: the calls still upstream stay counted, nothing is billed past the cap`, async () => {
      const c = await start();
      const reservedUsd = await reservationOf(c);
      // Room for the calls in flight and ten more.
      const capUsd = Number((reservedUsd * (IN_FLIGHT + 10)).toFixed(9));
      await c.connect("kim", capUsd);
      const billedBefore = c.billedUsd();

      const first = Array.from({ length: IN_FLIGHT }, (_, i) => callThrough(c, i, "kim"));
      await pollUntil("the calls in flight journaled", async () => ((await journaled(c, "kim")) === IN_FLIGHT ? true : undefined), 5);
      await lose(c);
      // As many again while they are upstream: only what is really left can be granted.
      const after = Array.from({ length: IN_FLIGHT }, (_, i) => callThrough(c, i, "kim"));
      const statuses = await Promise.all([...first, ...after]);
      expect(statuses.slice(0, IN_FLIGHT)).toEqual(Array.from({ length: IN_FLIGHT }, () => 200));
      await expectHeld(c, "kim", capUsd, billedBefore, statuses);
    });
  }

  test("restarted from an older snapshot: the stale counters are not trusted; /status shows the ledger, and the cap holds", async () => {
    const c = await start(true);
    const reservedUsd = await reservationOf(c);
    const capUsd = Number((reservedUsd * 20).toFixed(9));
    await c.connect("lou", capUsd);
    const billedBefore = c.billedUsd();
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push(await callThrough(c, i, "lou"));
    const old = await c.redis!.snapshot();
    statuses.push(...(await Promise.all(Array.from({ length: 8 }, (_, i) => callThrough(c, i, "lou")))));
    const spentNano = (await c.ledger("lou")).reduce((sum, r) => sum + r.cost_nano, 0);

    await c.redis!.restore(old);
    // The snapshot's counters say three calls; the ledger says eleven.
    const shown = await pollUntil("/status answering again", async () => (await c.status(c.servers[1]!, "lou").catch(() => undefined))?.usage.monthlyUsd);
    expect(Math.round(shown * 1e9)).toBe(spentNano);
    for (let round = 0; round < 4 && !statuses.includes(402); round++)
      statuses.push(...(await Promise.all(Array.from({ length: 8 }, (_, i) => callThrough(c, i, "lou")))));
    expect(statuses).toContain(402);
    await expectHeld(c, "lou", capUsd, billedBefore, statuses);
  });
});
