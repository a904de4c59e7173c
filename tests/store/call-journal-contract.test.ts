/**
 * The call journal (src/store/call-journal.ts) on both engines: entries open, learn their
 * generation id, are handed to the reconciler, are claimed once (by their owner when due,
 * by anyone once their owner's lease lapsed), and end with their ledger row.
 */
import { describe, expect, test } from "bun:test";
import type { Store } from "../../src/store";
import type { UsageRow } from "../../src/budget/usage-row";
import { storeEngines, withStore as withOpenStore } from "../helpers/store-engines";
import { journalEntry } from "../helpers/journal-entries";

const engines = storeEngines();

const entry = journalEntry;

const rowOf = (requestId: string): UsageRow => ({
  requestId,
  account: "u/app1/2026-01/alice",
  appId: "app1",
  appUserId: "alice",
  grantId: null,
  period: "2026-01",
  model: "openai/gpt-4o-mini",
  generationId: "gen-1",
  promptTokens: 1,
  completionTokens: 1,
  costNano: 100,
  source: "generation",
  status: "client_disconnected",
  streamed: true,
  startedAt: 1_000,
  finishedAt: 2_000,
});

describe.each(engines)("call journal on %s", (_name, open) => {
  const withStore = (work: (store: Store) => Promise<void>) => withOpenStore(open, work);

  test("an entry keeps whose key paid its call, through a claim by its owner and by another once the owner's lease lapsed", () =>
    withStore(async (store) => {
      const journal = store.callJournal;
      await store.instances.renew("me", 60_000);
      await journal.record({ open: [entry("paid-by-user", "me", { payer: "user" }), entry("paid-by-app", "me")], identify: [] });
      expect((await journal.find("paid-by-user"))!.payer).toBe("user");
      expect((await journal.find("paid-by-app"))!.payer).toBe("app");
      await journal.toReconcile("paid-by-user", "client_disconnected", "gen-u", 5_000);
      const claimed = await journal.claimDue("me", 5_000, 10, 60_000, "instance_died");
      expect(claimed).toEqual([
        { ...entry("paid-by-user", "me", { payer: "user", generationId: "gen-u", reconcileReason: "client_disconnected" }), reconcilingSince: 5_000 },
      ]);
      // While its owner's lease lives another instance takes nothing; once it lapses, both, each with its payer.
      const orphans = await journal.claimDue("other", 1_000_000, 10, 60_000, "instance_died");
      expect(Object.fromEntries(orphans.map((e) => [e.requestId, e.payer]))).toEqual({});
      await store.instances.drop("me");
      const taken = await journal.claimDue("other", 1_000_000, 10, 60_000, "instance_died");
      expect(Object.fromEntries(taken.map((e) => [e.requestId, e.payer]))).toEqual({ "paid-by-user": "user", "paid-by-app": "app" });
      expect((await journal.ownedBy("other")).map((e) => e.payer).sort()).toEqual(["app", "user"]);
    }));

  test("an entry opens, learns its generation id, is handed over, and is claimed by its owner once due", () =>
    withStore(async (store) => {
      const journal = store.callJournal;
      await store.instances.renew("me", 60_000);
      await journal.record({ open: [entry("r1", "me"), entry("r2", "me")], identify: [] });
      await journal.record({
        open: [],
        identify: [
          { requestId: "r1", generationId: "gen-r1" },
          { requestId: "r2", generationId: "gen-r2" },
        ],
      });
      expect(await journal.find("r1")).toEqual(entry("r1", "me", { generationId: "gen-r1" }));
      expect((await journal.find("r2"))!.generationId).toBe("gen-r2");
      // Running calls are nobody's to reconcile.
      expect(await journal.claimDue("me", 5_000, 10, 60_000, "instance_died")).toEqual([]);
      await journal.toReconcile("r1", "client_disconnected", null, 5_000);
      expect(await journal.claimDue("me", 4_999, 10, 60_000, "instance_died")).toEqual([]);
      const claimed = await journal.claimDue("me", 5_000, 10, 60_000, "instance_died");
      expect(claimed).toEqual([{ ...entry("r1", "me", { generationId: "gen-r1", reconcileReason: "client_disconnected" }), reconcilingSince: 5_000 }]);
      // Claimed: not again until the claim's lease passes, or a later time is set.
      expect(await journal.claimDue("me", 6_000, 10, 60_000, "instance_died")).toEqual([]);
      await journal.retryLater("r1", "me", 1, 7_000);
      expect((await journal.claimDue("me", 7_000, 10, 60_000, "instance_died")).map((e) => [e.requestId, e.attempts])).toEqual([["r1", 1]]);
      expect(await journal.counts()).toEqual({ running: 1, reconciling: 1 });
    }));

  test("an entry's reconciling begins at its hand-over and stays there through its claims and retries; a dead owner's running call's, at its take-over", () =>
    withStore(async (store) => {
      const journal = store.callJournal;
      await store.instances.renew("me", 60_000);
      await store.instances.renew("dead", 60_000);
      await journal.record({ open: [entry("handed", "me"), entry("running", "dead"), entry("handed-then-died", "dead")], identify: [] });
      await journal.toReconcile("handed", "client_disconnected", "gen-h", 5_000);
      await journal.toReconcile("handed-then-died", "upstream_stalled", "gen-d", 6_000);
      const since = (claimed: Array<{ requestId: string; reconcilingSince: number }>) =>
        Object.fromEntries(claimed.map((e) => [e.requestId, e.reconcilingSince]));
      expect(since(await journal.claimDue("me", 5_000, 10, 60_000, "instance_died"))).toEqual({ handed: 5_000 });
      await journal.retryLater("handed", "me", 1, 9_000);
      expect(since(await journal.claimDue("me", 9_000, 10, 60_000, "instance_died"))).toEqual({ handed: 5_000 });
      await journal.retryLater("handed", "me", 2, 70_000);
      // The dead owner's entries: one handed over before it died keeps its hand-over; the running one begins now.
      await store.instances.drop("dead");
      expect(since(await journal.claimDue("me", 50_000, 10, 60_000, "instance_died"))).toEqual({ running: 50_000, "handed-then-died": 6_000 });
      await journal.retryLater("running", "me", 1, 70_000);
      expect(since(await journal.claimDue("me", 70_000, 10, 60_000, "instance_died"))).toEqual({ handed: 5_000, running: 50_000 });
    }));

  test("the entries of an owner whose lease lapsed are anyone's: taken over once, with their reason", () =>
    withStore(async (store) => {
      const journal = store.callJournal;
      await store.instances.renew("alive", 60_000);
      await store.instances.renew("dead", 60_000);
      await journal.record({
        open: [entry("a1", "alive"), entry("d1", "dead", { generationId: "gen-d1" }), entry("d2", "dead", { reconcileReason: "upstream_stalled" })],
        identify: [],
      });
      await store.instances.renew("other", 60_000);
      expect(await journal.claimDue("other", 1_000, 10, 60_000, "instance_died")).toEqual([]);

      await store.instances.drop("dead");
      const taken = await journal.claimDue("other", 1_000, 10, 60_000, "instance_died");
      expect(taken.map((e) => [e.requestId, e.owner, e.reconcileReason]).sort()).toEqual([
        ["d1", "other", "instance_died"],
        ["d2", "other", "upstream_stalled"],
      ]);
      // Now "other"'s, under its claim: a third process takes nothing.
      await store.instances.renew("third", 60_000);
      expect(await journal.claimDue("third", 1_000, 10, 60_000, "instance_died")).toEqual([]);
      expect((await journal.notOwnedBy("other")).map((e) => e.requestId)).toEqual(["a1"]);
      expect((await journal.ownedBy("other")).map((e) => e.requestId).sort()).toEqual(["d1", "d2"]);
    }));

  test("a grant call's entry keeps its hold on its app's day (what it holds, the ceiling) through a claim; a user's has none", () =>
    withStore(async (store) => {
      const journal = store.callJournal;
      await store.instances.renew("me", 60_000);
      const grantCall = entry("g1", "me", {
        account: "g/grt1",
        appUserId: null,
        grantId: "grt1",
        ceilingReservationId: "g1/grant-day",
        ceilingReservedNano: 12_000,
        ceilingCapNano: 5_000_000,
      });
      await journal.record({ open: [grantCall, entry("u1", "me")], identify: [] });
      expect(await journal.find("g1")).toEqual(grantCall);
      expect(await journal.find("u1")).toMatchObject({ ceilingReservedNano: null, ceilingCapNano: null });
      await journal.toReconcile("g1", "client_disconnected", "gen-g", 5_000);
      const [claimed] = await journal.claimDue("me", 5_000, 10, 60_000, "instance_died");
      expect(claimed).toMatchObject({ requestId: "g1", ceilingReservedNano: 12_000, ceilingCapNano: 5_000_000 });
    }));

  test("a call's ledger row ends its entry; reservation ids are known as journaled by request or by grant day", () =>
    withStore(async (store) => {
      const journal = store.callJournal;
      await journal.record({ open: [entry("r1", "me", { ceilingReservationId: "r1/grant-day" }), entry("r2", "me")], identify: [] });
      expect(await journal.journaled(["r1", "r1/grant-day", "r2", "r9"])).toEqual(new Set(["r1", "r1/grant-day", "r2"]));
      expect(await store.usageLedger.insertBatch([rowOf("r1")])).toBe(1);
      expect(await journal.find("r1")).toBeNull();
      expect(await journal.journaled(["r1", "r1/grant-day", "r2"])).toEqual(new Set(["r2"]));
      expect(await store.usageLedger.insertBatch([rowOf("r2")])).toBe(1);
      expect(await journal.counts()).toEqual({ running: 0, reconciling: 0 });
      // Opening the same call twice keeps the first entry.
      await journal.record({ open: [entry("r3", "me", { reservedNano: 1 })], identify: [] });
      await journal.record({ open: [entry("r3", "me", { reservedNano: 2 })], identify: [] });
      expect((await journal.find("r3"))!.reservedNano).toBe(1);
    }));
});
