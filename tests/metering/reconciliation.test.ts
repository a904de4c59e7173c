/**
 * Calls whose usage the proxy does not see are settled at what the upstream billed
 * (ARCHITECTURE.md §3 "The hard cap"), against the mock upstream, which bills as OpenRouter
 * documents: a stream whose client left runs on (and is billed in full) on a provider that
 * cannot cancel; a non-streaming answer is billed in full whether or not anyone waits for it;
 * each generation's record is served at GET /generation. Through app.handle; the reconciler
 * runs its rounds when a test flushes (tests/helpers/chat-app.ts).
 */
import { describe, expect, test } from "bun:test";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";
import { usdToNanoCeil } from "../../src/money";
import { grantDayAccount } from "../../src/budget/accounts";
import { BILLING_MODELS, DEFAULT_MODELS } from "../../packages/mock-upstream/src";
import { obtainGrant } from "../helpers/consent";
import { leaveAfterFirstChunk } from "../helpers/leave-stream";

const MODEL = "openai/gpt-4o-mini";
const ask = (directive: string, extra: Record<string, unknown> = {}) => ({
  model: MODEL,
  messages: [{ role: "user", content: `Hi. ${directive}` }],
  max_tokens: 60,
  ...extra,
});
const account = (t: ChatTestApp, user: string) => `u/${t.appId}/2026-01/${user}`;
const billed = (t: ChatTestApp) => t.mock.served.reduce((sum, s) => sum + usdToNanoCeil(s.costUsd), 0);
const ledgerNano = (t: ChatTestApp) => (t.db.query("SELECT COALESCE(SUM(cost_nano), 0) AS n FROM usage_ledger").get() as { n: number }).n;
const rowOf = async (t: ChatTestApp, res: Response) => (await t.deps.store.usageLedger.find(res.headers.get("x-request-id")!))!;

describe("a client that leaves a stream", () => {
  test("on a provider that cannot cancel: the proxy reads on to the end, and charges the whole generation the upstream billed", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const res = await t.chat(ask("[[mock tokens=30 pause_ms=2 no_cancel]]", { stream: true }));
    await leaveAfterFirstChunk(res);
    await t.flush();
    const served = t.mock.served.at(-1)!;
    expect(served.cancelled).toBe(false);
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ status: "client_disconnected", source: "upstream", completionTokens: 30 });
    expect(row.costNano).toBe(usdToNanoCeil(served.costUsd));
  });

  test("past DISCONNECT_DRAIN_MS, the upstream's record of the generation settles it, never less than billed", async () => {
    const t = await chatTestApp({ env: { DISCONNECT_DRAIN_MS: "30" } });
    await t.connect("alice", 5);
    const res = await t.chat(ask("[[mock tokens=30 pause_ms=20 no_cancel]]", { stream: true }));
    await leaveAfterFirstChunk(res);
    await t.flush();
    const served = t.mock.served.at(-1)!;
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ status: "client_disconnected", source: "generation", generationId: served.id });
    // The provider ran to the end after the proxy let go: the record bills all 30 tokens.
    expect(row.costNano).toBe(usdToNanoCeil(served.costUsd));
    expect(row.costNano).toBeGreaterThan(0);
  });

  test("a grant's stream settled from the record above what its app's day reserved freezes the day in the totals, as a live call does", async () => {
    const models = [...DEFAULT_MODELS, ...BILLING_MODELS].map((m) => ({ ...m, pricing: { ...m.pricing } }));
    const t = await chatTestApp({ env: { DISCONNECT_DRAIN_MS: "30", GRANT_DAILY_CEILING_USD: "5" }, mock: { models } });
    const grant = await obtainGrant(t, { usd: "1" });
    // The web-search price rises upstream after the proxy loaded the catalogue: the record bills above the reservation.
    models.find((m) => m.id === "bill/search")!.pricing.web_search = "0.04";
    const body = ask("[[mock tokens=30 pause_ms=20 no_cancel]]", { model: "bill/search", plugins: [{ id: "web" }], stream: true });
    const res = await t.chat(body, { "x-service-user": "", "x-service-grant": grant.grantToken });
    await leaveAfterFirstChunk(res);
    await t.flush();
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ status: "client_disconnected", source: "generation" });
    expect(row.overrunNano).toBeGreaterThan(0);
    expect(await t.deps.store.usageTotals.frozenCapNano(grantDayAccount(t.appId, row.startedAt))).toBe(usdToNanoCeil(5));
  });

  test("on a provider that can cancel: the record bills what was produced, and so does the row", async () => {
    const t = await chatTestApp({ env: { DISCONNECT_DRAIN_MS: "30" } });
    await t.connect("alice", 5);
    const res = await t.chat(ask("[[mock tokens=30 pause_ms=20 cancellable]]", { stream: true }));
    await leaveAfterFirstChunk(res);
    await t.flush();
    const served = t.mock.served.at(-1)!;
    expect(served.cancelled).toBe(true);
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ source: "generation", costNano: usdToNanoCeil(served.costUsd) });
  });

  test("twenty streams left after their first chunk on a small cap: the upstream's bill stays under the cap, and the ledger equals it", async () => {
    const t = await chatTestApp({ env: { DISCONNECT_DRAIN_MS: "30", RL_CHAT_LIMIT: "1000" } });
    const cap = 0.0003;
    await t.connect("alice", cap);
    const calls = Array.from({ length: 20 }, () => t.chat(ask("[[mock tokens=60 pause_ms=10 no_cancel]]", { stream: true })));
    for (const res of await Promise.all(calls)) {
      if (res.status === 200) await leaveAfterFirstChunk(res);
      else expect(res.status).toBe(402);
    }
    await t.flush();
    expect(billed(t)).toBeLessThanOrEqual(usdToNanoCeil(cap));
    expect(ledgerNano(t)).toBe(billed(t));
    expect(await t.deps.budget.snapshot(account(t, "alice"))).toEqual({ spentNano: billed(t), reservedNano: 0 });
  });
});

describe("a JSON call slower than UPSTREAM_TIMEOUT_MS", () => {
  const slow = { UPSTREAM_TIMEOUT_MS: "100" };

  test("is answered 502, not to be retried; its late answer is metered at what the upstream billed", async () => {
    const t = await chatTestApp({ env: slow });
    await t.connect("alice", 5);
    const res = await t.chat(ask("[[mock tokens=5 delay_ms=250]]"));
    expect(res.status).toBe(502);
    expect(res.headers.get("x-should-retry")).toBe("false");
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("may still be billed");
    // Held, not refunded, while the upstream is still at it.
    expect((await t.deps.budget.snapshot(account(t, "alice"))).reservedNano).toBeGreaterThan(0);
    await t.flush();
    const served = t.mock.served.at(-1)!;
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ status: "ok", source: "upstream", generationId: served.id, costNano: usdToNanoCeil(served.costUsd) });
    expect(await t.deps.budget.snapshot(account(t, "alice"))).toEqual({ spentNano: row.costNano, reservedNano: 0 });
  });

  test("retried under the same Idempotency-Key: 409 while it runs, then its answer; the upstream is called once", async () => {
    const t = await chatTestApp({ env: slow });
    await t.connect("alice", 5);
    const key = { "idempotency-key": "slow-call-1" };
    const first = await t.chat(ask("[[mock tokens=5 delay_ms=250]]"), key);
    expect(first.status).toBe(502);
    const meanwhile = await t.chat(ask("[[mock tokens=5 delay_ms=250]]"), key);
    expect(meanwhile.status).toBe(409);
    await t.flush();
    const replay = await t.chat(ask("[[mock tokens=5 delay_ms=250]]"), key);
    expect(replay.status).toBe(200);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(((await replay.json()) as { id: string }).id).toBe(t.mock.served[0]!.id);
    expect(t.mock.served).toHaveLength(1);
  });

  test("an SDK retrying without a key: every call is charged what the upstream billed, and the cap holds", async () => {
    const t = await chatTestApp({ env: slow });
    const cap = 0.00005;
    await t.connect("alice", cap);
    for (let i = 0; i < 12; i++) {
      const res = await t.chat(ask("[[mock tokens=20 delay_ms=150]]"));
      expect([402, 502]).toContain(res.status);
    }
    await t.flush();
    expect(t.mock.served.length).toBeGreaterThan(0);
    expect(billed(t)).toBeLessThanOrEqual(usdToNanoCeil(cap));
    expect(ledgerNano(t)).toBe(billed(t));
  });

  test("an answer that never comes is charged its whole reservation once DISCONNECT_DRAIN_MS has passed", async () => {
    const t = await chatTestApp({ env: { ...slow, DISCONNECT_DRAIN_MS: "50" } });
    await t.connect("alice", 5);
    const res = await t.chat(ask("[[mock stall_before_headers]]"));
    expect(res.status).toBe(502);
    await t.flush();
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ status: "upstream_timeout", source: "reservation", generationId: null });
    expect(row.costNano).toBe(row.reservedNano!);
  });
});

describe("the reconciler", () => {
  test("a grant call left open by an earlier process is held again on its app's day at what the day's reservation held", async () => {
    const t = await chatTestApp();
    const startedAt = t.clock.now();
    const left = {
      requestId: "left-1",
      owner: "a-process-that-died",
      account: "g/grt-left",
      ceilingReservationId: "left-1/grant-day",
      ceilingReservedNano: 40_000,
      ceilingCapNano: 5_000_000_000,
      appId: t.appId,
      appUserId: null,
      grantId: "grt-left",
      payer: "app" as const,
      period: "2026-01",
      model: MODEL,
      streamed: true,
      startedAt,
      reservedNano: 30_000,
      capNano: 1_000_000_000,
      generationId: null,
      reconcileReason: null,
      attempts: 0,
    };
    await t.deps.store.callJournal.record({ open: [left], identify: [] });
    expect(await t.app.decorator.reconciler.adoptLeftovers(async () => {})).toBe(1);
    expect(await t.deps.budget.snapshot("g/grt-left")).toEqual({ spentNano: 0, reservedNano: 30_000 });
    expect(await t.deps.budget.snapshot(grantDayAccount(t.appId, startedAt))).toEqual({ spentNano: 0, reservedNano: 40_000 });
  });

  test("waits for a record that is late, holding the reservation, then settles at it", async () => {
    let upstreamNow = Date.now();
    const t = await chatTestApp({ env: { DISCONNECT_DRAIN_MS: "30" }, mock: { generationRecordDelayMs: 60_000, now: () => upstreamNow } });
    await t.connect("alice", 5);
    const res = await t.chat(ask("[[mock tokens=30 pause_ms=20 no_cancel]]", { stream: true }));
    await leaveAfterFirstChunk(res);
    await t.flush();
    const requestId = res.headers.get("x-request-id")!;
    expect(await t.deps.store.usageLedger.find(requestId)).toBeNull();
    const held = await t.deps.budget.snapshot(account(t, "alice"));
    expect(held.reservedNano).toBeGreaterThan(0);
    expect(await t.deps.store.callJournal.find(requestId)).toMatchObject({ attempts: 1, reconcileReason: "client_disconnected" });
    expect(t.app.decorator.reconciler.stats).toMatchObject({ fromRecords: 0, atReservation: 0 });

    // A minute on, the record is there; the reconciler looks again when its backoff is over.
    upstreamNow += 60_000;
    t.clock.advance(2000);
    await t.flush();
    const served = t.mock.served.at(-1)!;
    expect(await rowOf(t, res)).toMatchObject({ source: "generation", costNano: usdToNanoCeil(served.costUsd) });
    expect(await t.deps.budget.snapshot(account(t, "alice"))).toEqual({ spentNano: usdToNanoCeil(served.costUsd), reservedNano: 0 });
    expect(await t.deps.store.callJournal.find(requestId)).toBeNull();
  });

  test("gives up after RECONCILE_GIVE_UP_SECONDS and charges the reservation", async () => {
    const t = await chatTestApp({ env: { DISCONNECT_DRAIN_MS: "30", RECONCILE_GIVE_UP_SECONDS: "0" }, mock: { generationRecordDelayMs: 60_000 } });
    await t.connect("alice", 5);
    const res = await t.chat(ask("[[mock tokens=30 pause_ms=20 no_cancel]]", { stream: true }));
    await leaveAfterFirstChunk(res);
    await t.flush();
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ source: "reservation", status: "client_disconnected" });
    expect(row.costNano).toBe(row.reservedNano!);
    expect(t.app.decorator.reconciler.stats).toMatchObject({ fromRecords: 0, atReservation: 1, chargedNano: row.costNano, heldNano: row.costNano });
  });

  test("/metrics counts the calls it settled and what they were charged against what was held", async () => {
    const token = "reconcile-metrics-token-0123";
    const t = await chatTestApp({ env: { DISCONNECT_DRAIN_MS: "30", METRICS_TOKEN: token } });
    await t.connect("alice", 5);
    const res = await t.chat(ask("[[mock tokens=30 pause_ms=20 no_cancel]]", { stream: true }));
    await leaveAfterFirstChunk(res);
    await t.flush();
    const row = await rowOf(t, res);
    const text = await (await t.app.handle(new Request("http://localhost/metrics", { headers: { authorization: `Bearer ${token}` } }))).text();
    const metric = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]);
    expect(metric("proxy_reconciled_from_records")).toBe(1);
    expect(metric("proxy_reconciled_at_reservation")).toBe(0);
    expect(metric("proxy_reconciled_charged_usd")).toBeCloseTo(row.costNano / 1e9, 12);
    expect(metric("proxy_reconciliation_adjustment_usd")).toBeCloseTo((row.reservedNano! - row.costNano) / 1e9, 12);
  });
});
