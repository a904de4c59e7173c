import { describe, expect, test } from "bun:test";
import { InMemoryBudgetLedger } from "../../src/budget/ledger";

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
