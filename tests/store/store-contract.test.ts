/**
 * One contract, two engines: every repository behaviour the service relies on, run against
 * an in-memory SQLite store and a real PostgreSQL server (tests/helpers/postgres.ts), each
 * case on a fresh database.
 */
import { describe, expect, test } from "bun:test";
import type { Store } from "../../src/store";
import type { UsageRow } from "../../src/budget/usage-row";
import { storeEngines, withStore as withOpenStore } from "../helpers/store-engines";
import { approveConsentOrThrow } from "../helpers/grants";
import { grantDayAccount } from "../../src/budget/accounts";
import { createAppWithKey, issueKey } from "../../src/services/operator/secret-keys";

const engines = storeEngines();

const row = (over: Partial<UsageRow> = {}): UsageRow => ({
  requestId: `req-${crypto.randomUUID()}`,
  account: "u/app1/2026-01/alice",
  appId: "app1",
  appUserId: "alice",
  grantId: null,
  period: "2026-01",
  model: "openai/gpt-4o-mini",
  generationId: "gen-1",
  promptTokens: 10,
  completionTokens: 20,
  costNano: 1500,
  source: "upstream",
  status: "ok",
  streamed: true,
  startedAt: 1_000,
  finishedAt: 2_000,
  reservedNano: 9_000,
  overrunNano: 0,
  ...over,
});

describe.each(engines)("store contract on %s", (_name, open) => {
  const withStore = (work: (store: Store) => Promise<void>) => withOpenStore(open, work);

  test("apps: create, find, list, count, origins, keys issued, listed and revoked", () =>
    withStore(async (store) => {
      expect(await store.apps.count()).toBe(0);
      const { app, key } = await createAppWithKey(store.apps, "one", ["https://a.example"], 100, { maxGrantNano: 5_000 });
      expect(app).toMatchObject({
        name: "one",
        origins: ["https://a.example"],
        createdAt: 100,
        disabledAt: null,
        maxGrantNano: 5_000,
        grantDailyCeilingNano: null,
      });
      expect(app.id).not.toContain("_");
      expect(key.secretKey.startsWith(`sk_live_${app.id}_`)).toBe(true);
      expect(await store.apps.find(app.id)).toEqual(app);
      expect(await store.apps.find("nope")).toBeNull();
      expect(await store.apps.count()).toBe(1);
      expect((await store.apps.list()).map((a) => a.id)).toEqual([app.id]);
      expect(await store.apps.isRegisteredOrigin("https://a.example")).toBe(true);
      expect(await store.apps.isRegisteredOrigin("https://b.example")).toBe(false);

      const second = await issueKey(store.apps, app.id, 200);
      expect((await store.apps.activeKeysOf(app.id)).map((k) => k.id).sort()).toEqual([key.keyId, second.keyId].sort());
      const [stored] = await store.apps.activeKeysOf(app.id);
      expect(stored!.secretHash).toBeInstanceOf(Uint8Array);
      expect(stored!.secretHash.byteLength).toBe(32);
      expect(await store.apps.revokeKey(app.id, key.keyId, 300)).toBe(true);
      expect(await store.apps.revokeKey(app.id, key.keyId, 300)).toBe(false);
      expect(await store.apps.revokeKey("other", second.keyId, 300)).toBe(false);
      expect((await store.apps.activeKeysOf(app.id)).map((k) => k.id)).toEqual([second.keyId]);
      expect((await store.apps.keysOf(app.id)).map((k) => k.revokedAt)).toEqual([300, null]);

      const renamed = await store.apps.update(app.id, { name: "renamed", origins: ["https://b.example"] });
      expect(renamed).toMatchObject({ name: "renamed", origins: ["https://b.example"], maxGrantNano: 5_000 });
      expect(await store.apps.update(app.id, { grantDailyCeilingNano: 70_000 })).toMatchObject({ maxGrantNano: 5_000, grantDailyCeilingNano: 70_000 });
      expect(await store.apps.update(app.id, { maxGrantNano: null })).toMatchObject({ maxGrantNano: null, grantDailyCeilingNano: 70_000 });
      expect((await store.apps.update(app.id, { grantDailyCeilingNano: null }))!.grantDailyCeilingNano).toBeNull();
      const both = await createAppWithKey(store.apps, "two", [], 100, { maxGrantNano: 1, grantDailyCeilingNano: 2 });
      expect(await store.apps.find(both.app.id)).toMatchObject({ maxGrantNano: 1, grantDailyCeilingNano: 2 });
      expect(await store.apps.update("nope", { name: "x" })).toBeNull();
      expect(await store.apps.isRegisteredOrigin("https://b.example")).toBe(true);
      expect(await store.apps.setDisabled(app.id, 400)).toBe(true);
      expect((await store.apps.find(app.id))!.disabledAt).toBe(400);
      expect(await store.apps.isRegisteredOrigin("https://b.example")).toBe(false);
      expect(await store.apps.setDisabled(app.id, null)).toBe(true);
      expect((await store.apps.find(app.id))!.disabledAt).toBeNull();
      expect(await store.apps.setDisabled("nope", 1)).toBe(false);
    }));

  test("apps: a key is kept as the id and hash it was given, never a secret", () =>
    withStore(async (store) => {
      const first = { id: "keyfirst", secretHash: new Uint8Array(32).fill(7) };
      const app = await store.apps.create("hashed", [], 1, first);
      expect(app).not.toHaveProperty("key");
      await store.apps.addKey(app.id, { id: "keysecond", secretHash: new Uint8Array(32).fill(9) }, 2);
      const keys = await store.apps.keysOf(app.id);
      expect(keys.map((k) => [k.id, [...k.secretHash]])).toEqual([
        ["keyfirst", [...first.secretHash]],
        ["keysecond", new Array(32).fill(9)],
      ]);
    }));

  test("connections: approve, update, revoke, re-approve, funding invalid", () =>
    withStore(async (store) => {
      const { app } = await createAppWithKey(store.apps, "c", [], 1);
      expect(await store.connections.find(app.id, "u")).toBeNull();
      const first = await store.connections.approve(app.id, "u", 1_000, 10);
      expect(first).toEqual({
        appId: app.id,
        appUserId: "u",
        monthlyCapNano: 1_000,
        fundingStatus: "ok",
        fundingSource: "app",
        userKey: null,
        connectedAt: 10,
        updatedAt: 10,
        revokedAt: null,
      });
      expect((await store.connections.approve(app.id, "u", 2_000, 20)).connectedAt).toBe(10);
      await store.connections.markFundingInvalid(app.id, "u", 25);
      expect((await store.connections.findActive(app.id, "u"))!.fundingStatus).toBe("invalid");
      await store.connections.revoke(app.id, "u", 30);
      expect(await store.connections.findActive(app.id, "u")).toBeNull();
      expect((await store.connections.find(app.id, "u"))!.revokedAt).toBe(30);
      const again = await store.connections.approve(app.id, "u", 3_000, 40);
      expect(again).toMatchObject({ monthlyCapNano: 3_000, fundingStatus: "ok", connectedAt: 40, revokedAt: null });
      for (const user of ["b", "A", "a", "é"]) await store.connections.approve(app.id, user, 1, 50);
      const firstPage = await store.connections.listForApp(app.id, 3);
      expect(firstPage.map((c) => c.appUserId)).toEqual(["A", "a", "b"]);
      expect((await store.connections.listForApp(app.id, 10, "b")).map((c) => c.appUserId)).toEqual(["u", "é"]);
    }));

  test("settings: getOrCreate keeps the first value", () =>
    withStore(async (store) => {
      expect(await store.settings.get("k")).toBeNull();
      expect(await store.settings.getOrCreate("k", () => "first")).toBe("first");
      expect(await store.settings.getOrCreate("k", () => "second")).toBe("first");
      const claims = await Promise.all([store.settings.claim("once", "a"), store.settings.claim("once", "b")]);
      expect(claims.filter(Boolean)).toHaveLength(1);
      expect(await store.settings.get("once")).toBe(claims[0] ? "a" : "b");
    }));

  test("settings: replace and delete change a value only while it is still the expected one", () =>
    withStore(async (store) => {
      await store.settings.claim("k", "plain");
      const swaps = await Promise.all([store.settings.replace("k", "plain", "sealed-1"), store.settings.replace("k", "plain", "sealed-2")]);
      expect(swaps.filter(Boolean)).toHaveLength(1);
      expect(await store.settings.get("k")).toBe(swaps[0] ? "sealed-1" : "sealed-2");
      expect(await store.settings.replace("absent", "x", "y")).toBe(false);
      expect(await store.settings.delete("k", "plain")).toBe(false);
      expect(await store.settings.delete("k", (await store.settings.get("k"))!)).toBe(true);
      expect(await store.settings.get("k")).toBeNull();
    }));

  test("usage ledger: a batch writes rows and totals once, replays change nothing, overruns freeze", () =>
    withStore(async (store) => {
      const a = row({ costNano: 1_000, startedAt: 1 });
      const b = row({ costNano: 2_500, startedAt: 2 });
      const other = row({ account: "g/grt1", appUserId: null, grantId: "grt1", costNano: 7 });
      expect(await store.usageLedger.insertBatch([a, b, other])).toBe(3);
      expect(await store.usageLedger.insertBatch([a, b])).toBe(0);
      const twice = row({ costNano: 5 });
      expect(await store.usageLedger.insertBatch([twice, twice])).toBe(1);
      expect(await store.usageTotals.spentNano(a.account)).toBe(3_505);
      expect(await store.usageTotals.spentNano("g/grt1")).toBe(7);
      expect(await store.usageTotals.spentNano("nobody")).toBe(0);
      expect(await store.usageTotals.frozenCapNano(a.account)).toBeNull();
      const over = row({ costNano: 12_000, reservedNano: 9_000, overrunNano: 3_000, frozenCapNano: 50_000, startedAt: 3 });
      expect(await store.usageLedger.insertBatch([over])).toBe(1);
      expect(await store.usageTotals.frozenCapNano(a.account)).toBe(50_000);
      const { frozenCapNano: _, ...expected } = over;
      expect(await store.usageLedger.find(over.requestId)).toEqual(expected);
      expect(await store.usageLedger.find("missing")).toBeNull();
    }));

  test("usage ledger: a large batch of many accounts with replays and repeats adds each new row to its totals once", () =>
    withStore(async (store) => {
      // Longer than one multi-row statement (50 rows on SQLite), with three accounts mixed.
      const accounts = ["u/app1/2026-01/x", "u/app1/2026-01/y", "g/grt9"];
      const fresh = Array.from({ length: 130 }, (_, i) => row({ account: accounts[i % 3]!, costNano: i + 1, startedAt: i }));
      const earlier = fresh.slice(0, 7);
      expect(await store.usageLedger.insertBatch(earlier)).toBe(7);
      const frozen = row({ account: accounts[1]!, costNano: 1, frozenCapNano: 900, startedAt: 500 });
      const batch = [...fresh, fresh[60]!, ...earlier, frozen, fresh[129]!];
      expect(await store.usageLedger.insertBatch(batch)).toBe(124);
      for (const [k, account] of accounts.entries()) {
        const mine = fresh.filter((_, i) => i % 3 === k);
        const expected = mine.reduce((sum, r) => sum + r.costNano, 0) + (account === frozen.account ? 1 : 0);
        expect(await store.usageTotals.spentNano(account)).toBe(expected);
      }
      expect(await store.usageTotals.frozenCapNano(accounts[1]!)).toBe(900);
      expect(await store.usageTotals.frozenCapNano(accounts[0]!)).toBeNull();
      expect(await store.usageLedger.find(fresh[99]!.requestId)).toMatchObject({ costNano: 100, account: accounts[0] });
    }));

  test("usage ledger: a user's rows page newest first by (startedAt, requestId)", () =>
    withStore(async (store) => {
      const rows = [1, 2, 2, 3, 4].map((t, i) => row({ startedAt: t, requestId: `r${i}` }));
      await store.usageLedger.insertBatch([...rows, row({ appUserId: "bob", account: "u/app1/2026-01/bob" })]);
      const first = await store.usageLedger.listForUser("app1", "alice", "2026-01", 2);
      expect(first.map((r) => r.requestId)).toEqual(["r4", "r3"]);
      const last = first[1]!;
      const next = await store.usageLedger.listForUser("app1", "alice", "2026-01", 10, { startedAt: last.startedAt, requestId: last.requestId });
      expect(next.map((r) => r.requestId)).toEqual(["r2", "r1", "r0"]);
      expect(await store.usageLedger.listForUser("app1", "alice", "2026-02", 10)).toEqual([]);
      // The app's rows in [2, 4), oldest first, paged.
      const page = await store.usageLedger.listForApp("app1", 2, 4, 2);
      expect(page.map((r) => r.requestId)).toEqual(["r1", "r2"]);
      const rest = await store.usageLedger.listForApp("app1", 2, 4, 10, { startedAt: page[1]!.startedAt, requestId: page[1]!.requestId });
      expect(rest.map((r) => r.requestId)).toEqual(["r3"]);
    }));

  test("grants: a consent page of an app disabled since approves nothing, and stays usable", () =>
    withStore(async (store) => {
      const { app } = await createAppWithKey(store.apps, "d", ["https://d.example"], 1);
      const token = await store.grants.createConsentRequest(
        { appId: app.id, usdCapNano: 5_000, maxUses: 1, ttlSeconds: 60, origin: "https://d.example", state: "s" },
        100,
        10_000,
      );
      await store.apps.setDisabled(app.id, 150);
      expect(await store.grants.approveConsent(token, 200)).toEqual({ kind: "app_disabled" });
      expect(await store.grants.listForApp(app.id, 10)).toEqual([]);
      await store.apps.setDisabled(app.id, null);
      expect((await store.grants.approveConsent(token, 300)).kind).toBe("approved");
    }));

  test("grants: a consent token approves one grant, once, before it expires; uses are counted", () =>
    withStore(async (store) => {
      const { app } = await createAppWithKey(store.apps, "g", ["https://g.example"], 1);
      const token = await store.grants.createConsentRequest(
        { appId: app.id, usdCapNano: 5_000, maxUses: 2, ttlSeconds: 60, origin: "https://g.example", state: "s" },
        100,
        1_000,
      );
      expect(await store.grants.consentAppId(token)).toBe(app.id);
      expect(await store.grants.approveConsent(token, 2_000)).toEqual({ kind: "unusable" }); // expired
      const token2 = await store.grants.createConsentRequest(
        { appId: app.id, usdCapNano: 5_000, maxUses: 2, ttlSeconds: 60, origin: "https://g.example", state: "s" },
        100,
        1_000,
      );
      const both = await Promise.all([store.grants.approveConsent(token2, 200), store.grants.approveConsent(token2, 200)]);
      expect(both.map((a) => a.kind).sort()).toEqual(["approved", "unusable"]);
      const approved = both.find((a) => a.kind === "approved")!;
      if (approved.kind !== "approved") throw new Error("unreachable");
      expect(approved.state).toBe("s");
      expect(approved.grant).toMatchObject({
        appId: app.id,
        usdCapNano: 5_000,
        maxUses: 2,
        uses: 0,
        origin: "https://g.example",
        createdAt: 200,
        expiresAt: 60_200,
        revokedAt: null,
      });
      expect(await store.grants.findByToken(approved.grantToken)).toEqual(approved.grant);
      expect(await store.grants.consumeUse(approved.grant.id, 300)).toBe(true);
      expect(await store.grants.consumeUse(approved.grant.id, 300)).toBe(true);
      expect(await store.grants.consumeUse(approved.grant.id, 300)).toBe(false);
      expect((await store.grants.find(approved.grant.id))!.uses).toBe(2);
      await store.grants.revoke(approved.grant.id, 400);
      expect((await store.grants.find(approved.grant.id))!.revokedAt).toBe(400);
      expect((await store.grants.listForApp(app.id, 10)).map((g) => g.id)).toEqual([approved.grant.id]);
      expect(await store.grants.listForApp(app.id, 10, { createdAt: approved.grant.createdAt, id: approved.grant.id })).toEqual([]);
      expect(await store.grants.listForApp("other", 10)).toEqual([]);
    }));

  test("usage ledger: a grant's row also counts toward its app's day (the daily ceiling's account); a replay counts nothing", () =>
    withStore(async (store) => {
      const day = Date.UTC(2026, 0, 15);
      const grantRow = (requestId: string, appId: string, startedAt: number, costNano: number) =>
        row({ requestId, account: `g/grt${requestId}`, appId, appUserId: null, grantId: `grt${requestId}`, startedAt, finishedAt: startedAt + 1, costNano });
      await store.usageLedger.insertBatch([
        grantRow("g1", "app1", day + 1_000, 300),
        grantRow("g2", "app1", day + 2_000, 200),
        grantRow("g3", "app1", day - 1, 7), // the day before
        grantRow("g4", "app2", day + 1_000, 5), // another app
        row({ requestId: "u1", startedAt: day + 1_000, costNano: 11 }), // a user's call: not a grant's
      ]);
      expect(await store.usageLedger.insertBatch([grantRow("g1", "app1", day + 1_000, 300)])).toBe(0);
      expect(await store.usageTotals.spentNano(grantDayAccount("app1", day + 5_000))).toBe(500);
      expect(await store.usageTotals.spentNano(grantDayAccount("app1", day - 1))).toBe(7);
      expect(await store.usageTotals.spentNano(grantDayAccount("app2", day))).toBe(5);
      expect(await store.usageTotals.spentNano("g/grtg1")).toBe(300);
    }));

  test("usage ledger: a grant's overrun of its day's ceiling freezes the day's totals, its own cap the grant's; a replay changes nothing", () =>
    withStore(async (store) => {
      const day = Date.UTC(2026, 0, 15);
      const grantRow = (requestId: string, appId: string, over: Partial<UsageRow>) =>
        row({ requestId, account: `g/grt${requestId}`, appId, appUserId: null, grantId: `grt${requestId}`, startedAt: day + 1_000, ...over });
      // Beside a plain grant row in the same batch, and another app's grant overrunning only its own reservation.
      const over = grantRow("g1", "app1", { costNano: 12_000, reservedNano: 9_000, overrunNano: 3_000, frozenCapNano: 50_000, dayFrozenCapNano: 2_000_000 });
      const batch = [grantRow("g2", "app1", { costNano: 10 }), over, grantRow("g3", "app2", { costNano: 9_500, overrunNano: 500, frozenCapNano: 40_000 })];
      expect(await store.usageLedger.insertBatch(batch)).toBe(3);
      expect(await store.usageTotals.frozenCapNano(grantDayAccount("app1", day))).toBe(2_000_000);
      expect(await store.usageTotals.frozenCapNano("g/grtg1")).toBe(50_000);
      expect(await store.usageTotals.frozenCapNano("g/grtg2")).toBeNull();
      expect(await store.usageTotals.frozenCapNano(grantDayAccount("app2", day))).toBeNull();
      expect(await store.usageTotals.frozenCapNano("g/grtg3")).toBe(40_000);
      expect(await store.usageTotals.spentNano(grantDayAccount("app1", day))).toBe(12_010);
      // Not a column of the ledger: the row reads back without it.
      const { frozenCapNano: _f, dayFrozenCapNano: _d, ...expected } = over;
      expect(await store.usageLedger.find(over.requestId)).toEqual(expected);
      expect(await store.usageLedger.insertBatch([{ ...over, dayFrozenCapNano: 3_000_000 }])).toBe(0);
      expect(await store.usageTotals.frozenCapNano(grantDayAccount("app1", day))).toBe(2_000_000);
    }));

  test("grants: purging deletes used and expired consent requests in bounded batches, and keeps live ones", () =>
    withStore(async (store) => {
      const { app } = await createAppWithKey(store.apps, "purge", ["https://p.example"], 1);
      const ask = (now: number, lifetimeMs: number) =>
        store.grants.createConsentRequest(
          { appId: app.id, usdCapNano: 1, maxUses: null, ttlSeconds: 60, origin: "https://p.example", state: "" },
          now,
          lifetimeMs,
        );
      const expired = await Promise.all([1, 2, 3, 4, 5].map((i) => ask(0, 1_000 + i))); // expire at 1 001..1 005
      const used = await ask(1_000, 60_000);
      await approveConsentOrThrow(store.grants, used, 1_500);
      const live = await ask(1_000, 60_000); // expires at 61 000
      const endsExactlyAtCutoff = await ask(0, 2_000);

      expect(await store.grants.purgeConsentRequests(2_000, 2)).toBe(2);
      expect(await store.grants.purgeConsentRequests(2_000, 100)).toBe(5); // the other 3 expired, the used one, the one ending at 2 000
      expect(await store.grants.purgeConsentRequests(2_000, 100)).toBe(0);
      for (const token of [...expired, used, endsExactlyAtCutoff]) expect(await store.grants.consentAppId(token)).toBeNull();
      expect(await store.grants.consentAppId(live)).toBe(app.id);
      expect((await store.grants.approveConsent(live, 2_000)).kind).toBe("approved");
    }));

  test("idempotency keys: claim, conflict, mismatch, done, release, lapsed lease, purge", () =>
    withStore(async (store) => {
      const keys = store.idempotencyKeys;
      const print = new Uint8Array([1, 2, 3]);
      expect(await keys.claim("app1", "k", print, "r1", 1_000, 100, 10_000)).toEqual({ kind: "claimed" });
      expect(await keys.claim("app1", "k", print, "r2", 1_010, 100, 10_000)).toEqual({ kind: "running", requestId: "r1" });
      expect(await keys.claim("app1", "k", new Uint8Array([9]), "r2", 1_010, 100, 10_000)).toEqual({ kind: "mismatch" });
      expect(await keys.renew("app1", "k", "r1", 5_000)).toBe(true);
      expect(await keys.renew("app1", "k", "r9", 5_000)).toBe(false);
      await keys.complete("app1", "k", "r1", { status: 200, contentType: "application/json", generationId: "g1", body: new Uint8Array([65, 66]) }, 20_000);
      const done = await keys.claim("app1", "k", print, "r3", 1_020, 100, 10_000);
      expect(done).toEqual({
        kind: "done",
        requestId: "r1",
        answer: { status: 200, contentType: "application/json", generationId: "g1", body: new Uint8Array([65, 66]) },
      });
      // A lapsed lease is taken over; a released key runs again.
      expect(await keys.claim("app1", "lapsed", print, "a", 1_000, 100, 10_000)).toEqual({ kind: "claimed" });
      expect(await keys.claim("app1", "lapsed", print, "b", 1_200, 100, 10_000)).toEqual({ kind: "claimed" });
      await keys.release("app1", "lapsed", "b");
      expect(await keys.claim("app1", "lapsed", print, "c", 1_300, 100, 10_000)).toEqual({ kind: "claimed" });
      // Two concurrent first claims: exactly one runs.
      const both = await Promise.all([keys.claim("app1", "race", print, "x", 1, 100, 10_000), keys.claim("app1", "race", print, "y", 1, 100, 10_000)]);
      expect(both.filter((o) => o.kind === "claimed")).toHaveLength(1);
      expect(await keys.purgeExpired(50_000, 100)).toBe(3); // k, lapsed and race
    }));

  test("ping answers while the store is open", () =>
    withStore(async (store) => {
      await store.ping();
    }));
});
