/**
 * An account's truth (UsageTotalsRepository.truth, src/budget/truth.ts) on both engines: the
 * ledger's settled spend and freeze and the holds the call journal lists on it, a grant-day
 * account's from its grant calls of that day, and a call counted exactly once: as a hold while
 * journaled, as a row once written (the row ends its entry in the same transaction).
 */
import { describe, expect, test } from "bun:test";
import type { JournalEntry } from "../../src/store/call-journal";
import { grantDayAccount } from "../../src/budget/accounts";
import { storeEngines, withStore } from "../helpers/store-engines";
import { usageRow } from "../helpers/usage-rows";
import { journalEntry } from "../helpers/journal-entries";

const engines = storeEngines();
const ALICE = "u/app1/2026-01/alice";

const entry = (requestId: string, over: Partial<JournalEntry> = {}): JournalEntry => journalEntry(requestId, "proc-a", { model: "m", ...over });

describe.each(engines)("account truth on %s", (_name, open) => {
  test("settled spend plus the journal's holds; a call is a hold until its row, then its row", () =>
    withStore(open, async (store) => {
      expect(await store.usageTotals.truth(ALICE)).toEqual({ spentNano: 0, frozenCapNano: null, holds: [] });
      await store.usageLedger.insertBatch([usageRow(1, "alice", 500)]);
      await store.callJournal.record({ open: [entry("req-2"), entry("req-3", { owner: "proc-b", reservedNano: 4_000 })], identify: [] });
      await store.callJournal.record({ open: [entry("other", { account: "u/app1/2026-01/bob" })], identify: [] });
      const truth = await store.usageTotals.truth(ALICE);
      expect(truth.spentNano).toBe(500);
      expect(truth.holds.sort((a, b) => a.requestId.localeCompare(b.requestId))).toEqual([
        { requestId: "req-2", amountNano: 9_000, capNano: 1_000_000, owner: "proc-a" },
        { requestId: "req-3", amountNano: 4_000, capNano: 1_000_000, owner: "proc-b" },
      ]);
      await store.usageLedger.insertBatch([usageRow(2, "alice", 700)]);
      expect(await store.usageTotals.truth(ALICE)).toEqual({
        spentNano: 1_200,
        frozenCapNano: null,
        holds: [{ requestId: "req-3", amountNano: 4_000, capNano: 1_000_000, owner: "proc-b" }],
      });
    }));

  test("a grant-day account holds its grant calls of that UTC day, at the day's own amount and cap", () =>
    withStore(open, async (store) => {
      const day = Date.parse("2026-01-05T00:00:00Z");
      const grantCall = (id: string, at: number, over: Partial<JournalEntry> = {}) =>
        entry(id, { account: `g/grant-${id}`, grantId: `grant-${id}`, appUserId: null, ceilingReservationId: `${id}/grant-day`, startedAt: at, ...over });
      await store.callJournal.record({
        open: [
          grantCall("g1", day + 10, { ceilingReservedNano: 6_000, ceilingCapNano: 50_000 }),
          grantCall("g2", day + 86_399_999), // journaled before the day's hold was: the grant's own amount and cap
          grantCall("g3", day - 1),
          grantCall("g4", day + 20, { appId: "app2" }),
          entry("u1", { startedAt: day + 30 }),
        ],
        identify: [],
      });
      const truth = await store.usageTotals.truth(grantDayAccount("app1", day + 5));
      expect(truth.holds.sort((a, b) => a.requestId.localeCompare(b.requestId))).toEqual([
        { requestId: "g1/grant-day", amountNano: 6_000, capNano: 50_000, owner: "proc-a" },
        { requestId: "g2/grant-day", amountNano: 9_000, capNano: 1_000_000, owner: "proc-a" },
      ]);
      expect((await store.usageTotals.truth("g/grant-g1")).holds.map((h) => h.requestId)).toEqual(["g1"]);
    }));
});
