/**
 * The PostgreSQL budget ledger (src/store/postgres/budget-ledger.ts) on a real server:
 * the BudgetLedger contract, with several ledgers (instances, each with its own pool)
 * on one database, and what happens to the reservations of an instance that dies.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { PostgresBudgetLedger } from "../../src/store/postgres/budget-ledger";
import { openPostgresStore, type PostgresStore } from "../../src/store/postgres";
import type { UsageRow } from "../../src/budget/usage-row";
import { memoryLogger } from "../../src/logger";
import { startPostgres, type TestPostgres } from "../helpers/postgres";

let pg: TestPostgres;
let url: string;
const stores: PostgresStore[] = [];
let sql: SQL;

beforeAll(async () => {
  pg = await startPostgres();
  url = await pg.createDatabase();
  sql = new SQL(url, { max: 2 });
});
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await sql?.close({ timeout: 0 });
  await pg?.destroy();
});

/** One instance: its own store (pool) and ledger, with a live lease. */
async function instance(): Promise<PostgresBudgetLedger> {
  return (await countedInstance()).ledger;
}

/** An instance whose round trips to the database are counted (each `run` is one transaction). */
async function countedInstance(): Promise<{ ledger: PostgresBudgetLedger; trips: () => number }> {
  const store = await openPostgresStore(url, { poolSize: 8 });
  stores.push(store);
  let trips = 0;
  const run = store.database.run.bind(store.database);
  store.database.run = (work) => {
    trips++;
    return run(work);
  };
  const ledger = new PostgresBudgetLedger(store.database, memoryLogger());
  await ledger.start();
  return { ledger, trips: () => trips };
}

let seq = 0;
const fresh = (label: string) => `${label}-${Date.now().toString(36)}-${seq++}`;
const rowFor = (requestId: string, account: string, costNano: number, over: Partial<UsageRow> = {}): UsageRow => ({
  requestId,
  account,
  appId: "app1",
  appUserId: "u",
  grantId: null,
  period: "2026-01",
  model: "m",
  generationId: null,
  promptTokens: 1,
  completionTokens: 1,
  costNano,
  source: "upstream",
  status: "ok",
  streamed: false,
  startedAt: 1,
  finishedAt: 2,
  reservedNano: null,
  overrunNano: 0,
  ...over,
});

describe("PostgresBudgetLedger", () => {
  test("grants the most that fits between min and desired; refuses below min with the counters", async () => {
    const ledger = await instance();
    const account = fresh("acct");
    expect(await ledger.reserve(account, fresh("r"), 1000, 100, 700)).toEqual({ ok: true, grantedNano: 700 });
    expect(await ledger.reserve(account, fresh("r"), 1000, 100, 700)).toEqual({ ok: true, grantedNano: 300 });
    expect(await ledger.reserve(account, fresh("r"), 1000, 1, 700)).toEqual({ ok: false, spentNano: 0, reservedNano: 1000 });
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 1000 });
  });

  test("settle with its row: the row and the cost land once, the reservation is released", async () => {
    const ledger = await instance();
    const account = fresh("acct");
    const id = fresh("r");
    await ledger.reserve(account, id, 10_000, 1, 5_000);
    await ledger.settle(id, 1_234, rowFor(id, account, 1_234));
    await ledger.settle(id, 1_234, rowFor(id, account, 1_234));
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 1_234, reservedNano: 0 });
    const [row] = await sql`SELECT count(*)::int AS n FROM usage_ledger WHERE request_id = ${id}`;
    expect(row.n).toBe(1);
    const [totals] = await sql`SELECT request_count::int AS n FROM usage_totals WHERE account = ${account}`;
    expect(totals.n).toBe(1);
  });

  test("settle without a row (refused after reserving) counts its cost once, and an unknown id changes nothing", async () => {
    const ledger = await instance();
    const account = fresh("acct");
    const id = fresh("r");
    await ledger.reserve(account, id, 10_000, 1, 5_000);
    await ledger.settle(id, 300);
    await ledger.settle(id, 300);
    await ledger.settle(fresh("unknown"), 999);
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 300, reservedNano: 0 });
  });

  test("a cost above the reservation freezes the account at its cap; a higher cap lifts it", async () => {
    const ledger = await instance();
    const account = fresh("acct");
    const id = fresh("r");
    await ledger.reserve(account, id, 10_000, 1, 1_000);
    await ledger.settle(id, 1_500, rowFor(id, account, 1_500, { reservedNano: 1_000, overrunNano: 500, frozenCapNano: 10_000 }));
    expect(await ledger.reserve(account, fresh("r"), 10_000, 1, 10)).toEqual({ ok: false, spentNano: 1_500, reservedNano: 0, frozen: true });
    expect(await ledger.reserve(account, fresh("r"), 20_000, 1, 10)).toEqual({ ok: true, grantedNano: 10 });
  });

  test("500 concurrent reservations from three instances never exceed the cap, and fill it to within min", async () => {
    const ledgers = await Promise.all([instance(), instance(), instance()]);
    const account = fresh("acct");
    const outcomes = await Promise.all(Array.from({ length: 500 }, (_, i) => ledgers[i % 3]!.reserve(account, fresh("r"), 100_000, 150, 400)));
    const granted = outcomes.reduce((sum, o) => sum + (o.ok ? o.grantedNano : 0), 0);
    expect(granted).toBeLessThanOrEqual(100_000);
    expect(granted).toBeGreaterThan(100_000 - 150);
    expect(await ledgers[0]!.snapshot(account)).toEqual({ spentNano: 0, reservedNano: granted });
  });

  test("reserves and settles that arrive together share a transaction; the cap, the rows and the totals stay exact", async () => {
    const { ledger, trips } = await countedInstance();
    const account = fresh("acct");
    const ids = Array.from({ length: 200 }, () => fresh("r"));
    const before = trips();
    const outcomes = await Promise.all(ids.map((id) => ledger.reserve(account, id, 50_000, 150, 400)));
    // One trip per call would be 200: the first goes alone, the rest wait for it together.
    expect(trips() - before).toBeLessThan(10);
    const granted = outcomes.map((o) => (o.ok ? o.grantedNano : 0));
    const total = granted.reduce((sum, g) => sum + g, 0);
    expect(total).toBeLessThanOrEqual(50_000);
    expect(total).toBeGreaterThan(50_000 - 150);
    const admitted = ids.filter((_, i) => granted[i]! > 0);
    const settledAt = trips();
    // Each costs a little less than it reserved: 100 each.
    await Promise.all(admitted.map((id) => ledger.settle(id, 100, rowFor(id, account, 100))));
    expect(trips() - settledAt).toBeLessThan(10);
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 100 * admitted.length, reservedNano: 0 });
    const [rows] = await sql`SELECT count(*)::int AS n, sum(cost_nano)::bigint AS cost FROM usage_ledger WHERE account = ${account}`;
    expect([rows.n, Number(rows.cost)]).toEqual([admitted.length, 100 * admitted.length]);
    const [totals] = await sql`SELECT request_count::int AS n FROM usage_totals WHERE account = ${account}`;
    expect(totals.n).toBe(admitted.length);
  });

  test("in one batch, a request that already holds a reservation fails alone, and a repeated settle counts once", async () => {
    const ledger = await instance();
    const account = fresh("acct");
    const [held, other] = [fresh("r"), fresh("r")];
    await ledger.reserve(account, held, 10_000, 1, 1_000);
    const [again, fine] = await Promise.allSettled([ledger.reserve(account, held, 10_000, 1, 1_000), ledger.reserve(account, other, 10_000, 1, 2_000)]);
    expect(again.status === "rejected" && String(again.reason)).toContain("already holds a reservation");
    expect(fine).toEqual({ status: "fulfilled", value: { ok: true, grantedNano: 2_000 } });
    const row = rowFor(held, account, 600);
    await Promise.all([ledger.settle(held, 600, row), ledger.settle(held, 600, row), ledger.settle(other, 0)]);
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 600, reservedNano: 0 });
  });

  test("batches over several accounts from three instances, with sweeps running, end with every account exact", async () => {
    const ledgers = await Promise.all([instance(), instance(), instance()]);
    const accounts = Array.from({ length: 5 }, () => fresh("acct"));
    // Calls on all five accounts at once, in a different account order on each instance,
    // each reserving and then settling (with its row), while sweeps take the accounts too.
    const calls = Array.from({ length: 300 }, async (_, i) => {
      const ledger = ledgers[i % 3]!;
      const account = accounts[(i * (1 + (i % 3)) + Math.floor(i / 7)) % 5]!;
      const id = fresh("r");
      const outcome = await ledger.reserve(account, id, 1_000_000, 1, 500);
      if (!outcome.ok) throw new Error("refused under a cap it cannot reach");
      await ledger.settle(id, 10 + (i % 4), rowFor(id, account, 10 + (i % 4)));
      return { account, cost: 10 + (i % 4) };
    });
    const sweeps = Array.from({ length: 5 }, (_, i) => ledgers[i % 3]!.sweep());
    const done = await Promise.all(calls);
    expect(await Promise.all(sweeps)).toEqual([0, 0, 0, 0, 0]);
    for (const account of accounts) {
      const spent = done.filter((d) => d.account === account).reduce((sum, d) => sum + d.cost, 0);
      expect(await ledgers[0]!.snapshot(account)).toEqual({ spentNano: spent, reservedNano: 0 });
    }
  });

  test("a dead instance's reservations are released by a survivor; a late settle from it adds only its row", async () => {
    const [survivor, dying] = await Promise.all([instance(), instance()]);
    const account = fresh("acct");
    const held = fresh("r");
    const late = fresh("r");
    await dying.reserve(account, held, 10_000, 1, 4_000);
    await dying.reserve(account, late, 10_000, 1, 3_000);
    // Dies: its timers stop and its lease lapses (set in the past, as if 5 s had gone by).
    await dying.close(0).catch(() => {});
    await sql`INSERT INTO proxy_instances (id, lease_until) VALUES (${dying.instanceId}, now() - interval '1 second')`;
    expect(await survivor.sweep()).toBe(2);
    expect(await survivor.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 0 });
    expect(await survivor.sweep()).toBe(0);
    // It was only slow: its settle still arrives, and counts the row's cost, once.
    await dying.settle(late, 700, rowFor(late, account, 700));
    await dying.settle(late, 700, rowFor(late, account, 700));
    expect(await survivor.snapshot(account)).toEqual({ spentNano: 700, reservedNano: 0 });
  });

  test("with the database stopped, reserve and snapshot fail closed with `unavailable`; a failed settle is retried with its row", async () => {
    const ledger = await instance();
    const account = fresh("acct");
    const id = fresh("r");
    await ledger.reserve(account, id, 10_000, 1, 5_000);
    await pg.stop();
    try {
      await expect(ledger.reserve(account, fresh("r"), 10_000, 1, 10)).rejects.toMatchObject({ code: "unavailable" });
      await expect(ledger.snapshot(account)).rejects.toMatchObject({ code: "unavailable" });
      await ledger.settle(id, 42, rowFor(id, account, 42));
      // The settle, and the release of the refused reserve (it might have committed unseen).
      expect(ledger.pendingSettles).toBe(2);
    } finally {
      await pg.start();
    }
    for (let i = 0; i < 200 && ledger.pendingSettles > 0; i++) await Bun.sleep(50);
    expect(ledger.pendingSettles).toBe(0);
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 42, reservedNano: 0 });
  });

  test("a reserve that committed but whose answer was lost gives back its hold and its journal entry: the call was refused", async () => {
    const store = await openPostgresStore(url, { poolSize: 2 });
    stores.push(store);
    const ledger = new PostgresBudgetLedger(store.database, memoryLogger());
    await ledger.start();
    const account = fresh("acct");
    const id = fresh("r");
    const run = store.database.run.bind(store.database);
    let lose = true;
    store.database.run = async (work) => {
      const result = await run(work);
      if (!lose) return result;
      lose = false;
      throw new Error("Connection closed");
    };
    const journal = {
      ceilingReservationId: null,
      ceilingReservedNano: null,
      ceilingCapNano: null,
      appId: "app1",
      appUserId: "u",
      grantId: null,
      payer: "app" as const,
      period: "2026-01",
      model: "m",
      streamed: false,
      startedAt: 1,
    };
    await expect(ledger.reserve(account, id, 10_000, 1, 5_000, undefined, journal)).rejects.toThrow("Connection closed");
    for (let i = 0; i < 200 && ledger.pendingSettles > 0; i++) await Bun.sleep(50);
    expect(ledger.pendingSettles).toBe(0);
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 0 });
    expect(await sql`SELECT request_id FROM call_journal WHERE request_id = ${id}`).toEqual([]);
    expect(await sql`SELECT request_id FROM usage_ledger WHERE request_id = ${id}`).toEqual([]);
  });
});
