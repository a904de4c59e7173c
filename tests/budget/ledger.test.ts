import { describe, expect, test } from "bun:test";
import { InMemoryBudgetLedger } from "../../src/budget/ledger";
import { fixedRandom } from "../helpers/fixed-random";

describe("InMemoryBudgetLedger", () => {
  test("grants the most that fits between min and desired, refuses below min", async () => {
    const ledger = new InMemoryBudgetLedger(async () => 0);
    expect(await ledger.reserve("a", "r1", 1000, 100, 700)).toEqual({ ok: true, grantedNano: 700 });
    expect(await ledger.reserve("a", "r2", 1000, 100, 700)).toEqual({ ok: true, grantedNano: 300 });
    expect(await ledger.reserve("a", "r3", 1000, 1, 700)).toEqual({ ok: false, spentNano: 0, reservedNano: 1000 });
  });

  test("settle replaces the reservation with the actual cost, once", async () => {
    const ledger = new InMemoryBudgetLedger(async () => 0);
    await ledger.reserve("a", "r1", 1000, 100, 700);
    await ledger.settle("r1", 250);
    await ledger.settle("r1", 250);
    await ledger.settle("never-reserved", 999);
    expect(await ledger.snapshot("a")).toEqual({ spentNano: 250, reservedNano: 0 });
  });

  test("counters start from the durable totals", async () => {
    const ledger = new InMemoryBudgetLedger(async (account) => (account === "a" ? 900 : 0));
    expect(await ledger.reserve("a", "r1", 1000, 200, 200)).toMatchObject({ ok: false, spentNano: 900 });
    expect(await ledger.reserve("b", "r2", 1000, 200, 200)).toEqual({ ok: true, grantedNano: 200 });
  });

  test("many concurrent reservations never pass the cap", async () => {
    const ledger = new InMemoryBudgetLedger(async () => 0);
    const results = await Promise.all(Array.from({ length: 500 }, (_, i) => ledger.reserve("a", `r${i}`, 10_000, 30, 70)));
    const granted = results.reduce((sum, r) => sum + (r.ok ? r.grantedNano : 0), 0);
    expect(granted).toBeLessThanOrEqual(10_000);
    expect(results.filter((r) => !r.ok).length).toBeGreaterThan(0);
  });
});

/**
 * Forgetting idle accounts (InMemoryBudgetLedger.forgetIdle): memory follows the accounts in
 * use, and an account is dropped only when loading it again gives back the same counters.
 * `durable` stands in for the ledger totals the usage writer keeps: tests move a settle's
 * cost into it when its row would have been written.
 */
describe("InMemoryBudgetLedger forgets idle accounts", () => {
  function ledgerOn(durable: Map<string, { spent: number; frozen: number | null }>) {
    return new InMemoryBudgetLedger(
      async (account) => durable.get(account)?.spent ?? 0,
      async (account) => durable.get(account)?.frozen ?? null,
    );
  }

  test("an account unused for a whole round leaves memory once its totals are written, and comes back the same", async () => {
    const durable = new Map<string, { spent: number; frozen: number | null }>();
    const ledger = ledgerOn(durable);
    await ledger.reserve("a", "r1", 1000, 100, 400);
    await ledger.settle("r1", 300);
    expect(ledger.accountsInMemory).toBe(1);
    // Used in the round before the first sweep: not idle yet.
    expect(await ledger.forgetIdle()).toBe(0);
    // Idle for a round, but its row is not written: loading it would lose 300.
    expect(await ledger.forgetIdle()).toBe(0);
    durable.set("a", { spent: 300, frozen: null });
    expect(await ledger.forgetIdle()).toBe(1);
    expect(ledger.accountsInMemory).toBe(0);
    expect(await ledger.snapshot("a")).toEqual({ spentNano: 300, reservedNano: 0 });
    expect(await ledger.reserve("a", "r2", 1000, 100, 1000)).toEqual({ ok: true, grantedNano: 700 });
  });

  test("an account used since the round before, or holding a reservation, stays", async () => {
    const ledger = ledgerOn(new Map());
    await ledger.reserve("held", "h1", 1000, 1, 10);
    await ledger.snapshot("used");
    await ledger.forgetIdle();
    await ledger.snapshot("used");
    expect(await ledger.forgetIdle()).toBe(0);
    expect(ledger.accountsInMemory).toBe(2);
    await ledger.settle("h1", 0);
    // "used" was last used a round before "held" was settled: each goes after its own idle round.
    expect(await ledger.forgetIdle()).toBe(1);
    expect(await ledger.forgetIdle()).toBe(1);
    expect(ledger.accountsInMemory).toBe(0);
  });

  test("an adopted hold keeps its account until it is settled", async () => {
    const durable = new Map([["a", { spent: 50, frozen: null }]]);
    const ledger = ledgerOn(durable);
    await ledger.adopt([{ requestId: "old", account: "a", amountNano: 200, capNano: 1000 }]);
    await ledger.forgetIdle();
    expect(await ledger.forgetIdle()).toBe(0);
    await ledger.settle("old", 120);
    durable.set("a", { spent: 170, frozen: null });
    await ledger.forgetIdle();
    expect(await ledger.forgetIdle()).toBe(1);
    expect(await ledger.snapshot("a")).toEqual({ spentNano: 170, reservedNano: 0 });
  });

  test("a freeze the totals do not carry keeps the account", async () => {
    const durable = new Map<string, { spent: number; frozen: number | null }>();
    const ledger = ledgerOn(durable);
    await ledger.reserve("day", "r1", 1000, 10, 100);
    await ledger.settle("r1", 150);
    durable.set("day", { spent: 150, frozen: null });
    await ledger.forgetIdle();
    expect(await ledger.forgetIdle()).toBe(0);
    expect(await ledger.reserve("day", "r2", 1000, 10, 100)).toMatchObject({ ok: false, frozen: true });
  });

  test("an account reserved on while its totals are being read stays, and settles as usual", async () => {
    const durable = new Map([["a", { spent: 0, frozen: null }]]);
    let release = () => {};
    let reads = 0;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const ledger = new InMemoryBudgetLedger(
      async (account) => {
        // The first load is the account's own; the sweep's read waits for the gate.
        if (reads++ > 0) await gate;
        return durable.get(account)!.spent;
      },
      async () => null,
    );
    await ledger.snapshot("a");
    await ledger.forgetIdle();
    const sweep = ledger.forgetIdle();
    await Bun.sleep(0);
    expect(await ledger.reserve("a", "r1", 1000, 1, 10)).toEqual({ ok: true, grantedNano: 10 });
    release();
    expect(await sweep).toBe(0);
    await ledger.settle("r1", 10);
    expect(await ledger.snapshot("a")).toEqual({ spentNano: 10, reservedNano: 0 });
  });

  test("a seeded walk of calls, written rows and sweeps never passes a cap nor loses a settled cost", async () => {
    const random = fixedRandom(35);
    const CAP = 10_000;
    const accounts = Array.from({ length: 20 }, (_, i) => `u${i}`);
    const durable = new Map<string, { spent: number; frozen: number | null }>();
    const ledger = ledgerOn(durable);
    const settled = new Map<string, number>();
    const unwritten: Array<{ account: string; cost: number }> = [];
    const open = new Map<string, { account: string; granted: number }>();
    let forgotten = 0;
    for (let step = 0; step < 3000; step++) {
      const move = random(10);
      if (move < 4) {
        const account = accounts[random(accounts.length)]!;
        const id = `r${step}`;
        const outcome = await ledger.reserve(account, id, CAP, 50, 50 + random(900));
        const reserved = [...open.values()].filter((o) => o.account === account).reduce((sum, o) => sum + o.granted, 0);
        if (outcome.ok) {
          expect(outcome.grantedNano).toBeLessThanOrEqual(CAP - (settled.get(account) ?? 0) - reserved);
          open.set(id, { account, granted: outcome.grantedNano });
        } else expect(CAP - (settled.get(account) ?? 0) - reserved).toBeLessThan(50);
      } else if (move < 7 && open.size > 0) {
        const [id, { account, granted }] = [...open][random(open.size)]!;
        // Never above the reservation: no freeze, so a forgotten account reloads the same.
        const cost = random(granted + 1);
        await ledger.settle(id, cost);
        open.delete(id);
        settled.set(account, (settled.get(account) ?? 0) + cost);
        unwritten.push({ account, cost });
      } else if (move < 8) {
        // The writer's batch: the oldest rows reach the totals.
        for (const { account, cost } of unwritten.splice(0, random(unwritten.length + 1))) {
          const row = durable.get(account) ?? { spent: 0, frozen: null };
          durable.set(account, { spent: row.spent + cost, frozen: null });
        }
      } else forgotten += await ledger.forgetIdle();
    }
    expect(forgotten).toBeGreaterThan(30);
    for (const account of accounts) {
      const reserved = [...open.values()].filter((o) => o.account === account).reduce((sum, o) => sum + o.granted, 0);
      expect({ account, ...(await ledger.snapshot(account)) }).toEqual({ account, spentNano: settled.get(account) ?? 0, reservedNano: reserved });
    }
  });
});
