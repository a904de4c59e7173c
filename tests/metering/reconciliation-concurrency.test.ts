/**
 * The reconciler is not a queue of one (issue 56): calls are looked up side by side, at most
 * RECONCILE_CONCURRENCY at once, a lookup that hangs holds only its own slot, and how long a
 * record is waited for is measured from the call's hand-over to the reconciler, not by adding
 * up backoff steps. Through app.handle against the mock upstream, whose records can be
 * withheld, with every GET /generation seen (and held, where a test says) on its way there;
 * the clock is the test's.
 */
import { describe, expect, test } from "bun:test";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";
import type { FetchUpstream } from "../../src/upstream/client";
import { leaveAfterFirstChunk } from "../helpers/leave-stream";

const ask = (directive: string) => ({
  model: "openai/gpt-4o-mini",
  messages: [{ role: "user", content: `Hi. ${directive}` }],
  max_tokens: 60,
  stream: true,
});
/** Records that never appear (on the mock's own clock, which does not move). */
const WITHHELD = { generationRecordDelayMs: 365 * 86_400_000, now: () => Date.UTC(2026, 0, 15, 12) };
/** Bound for waiting on an eventual state: only ever reached when something is broken. */
const POLL_BOUND_MS = 20_000;

const isLookup = (url: string) => new URL(url).pathname.endsWith("/generation");
const lookedUpId = (url: string) => new URL(url).searchParams.get("id")!;
const rowOf = async (t: ChatTestApp, requestId: string) => (await t.deps.store.usageLedger.find(requestId))!;
const reconciling = async (t: ChatTestApp) => (await t.deps.store.callJournal.counts()).reconciling;

/** `n` streams whose clients leave after the first chunk: each handed to the reconciler with its generation id. */
async function leftStreams(t: ChatTestApp, n: number): Promise<string[]> {
  const calls = await Promise.all(Array.from({ length: n }, () => t.chat(ask("[[mock tokens=30 pause_ms=20 no_cancel]]"))));
  for (const res of calls) {
    expect(res.status).toBe(200);
    await leaveAfterFirstChunk(res);
  }
  await t.app.decorator.chat.idle(10_000);
  return calls.map((res) => res.headers.get("x-request-id")!);
}

async function until(what: string, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + POLL_BOUND_MS;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(10);
  }
}

describe("the reconciler looks calls up side by side", () => {
  test("a hundred calls stalled with their upstream are all charged within two rounds: looked up sixteen at a time, the last lookup at the give-up time", async () => {
    // The upstream stalls: its streams go quiet after the first chunks, and its record lookups
    // hang until the upstream client's deadline on them (UPSTREAM_TIMEOUT_MS) ends each.
    const lookups: string[] = [];
    let inFlight = 0;
    let most = 0;
    const fetchUpstream: FetchUpstream = (url, init) => {
      if (!isLookup(url)) return t.mock.fetch(new Request(url, init));
      lookups.push(lookedUpId(url));
      most = Math.max(most, ++inFlight);
      return new Promise<Response>((_, reject) => init.signal!.addEventListener("abort", () => (inFlight--, reject(init.signal!.reason)), { once: true }));
    };
    const t = await chatTestApp({ fetchUpstream, env: { UPSTREAM_TIMEOUT_MS: "100", RECONCILE_GIVE_UP_SECONDS: "600", RL_CHAT_LIMIT: "1000" } });
    await t.connect("alice", 50);
    // The relay cuts each stream after UPSTREAM_TIMEOUT_MS of silence and hands it to the reconciler.
    const calls = await Promise.all(Array.from({ length: 100 }, () => t.chat(ask("[[mock tokens=30 stall_mid_stream]]"))));
    await Promise.all(calls.map((res) => res.text().catch(() => "")));
    const ids = calls.map((res) => res.headers.get("x-request-id")!);

    await t.flush();
    expect(lookups).toHaveLength(100);
    expect(await reconciling(t)).toBe(100);
    expect(t.app.decorator.reconciler.stats).toMatchObject({ fromRecords: 0, atReservation: 0 });
    const held = (await t.deps.budget.snapshot(`u/${t.appId}/2026-01/alice`)).reservedNano;
    expect(held).toBeGreaterThan(0);

    // The give-up time, ten minutes after the hand-over, whatever the backoff would have said.
    t.clock.advance(600_000);
    await t.flush();
    expect(await reconciling(t)).toBe(0);
    expect(t.app.decorator.reconciler.stats).toMatchObject({ fromRecords: 0, atReservation: 100, heldNano: held, chargedNano: held });
    for (const id of ids) {
      const row = await rowOf(t, id);
      expect(row).toMatchObject({ status: "upstream_stalled", source: "reservation" });
      expect(row.costNano).toBe(row.reservedNano!);
    }
    expect(await t.deps.budget.snapshot(`u/${t.appId}/2026-01/alice`)).toEqual({ spentNano: held, reservedNano: 0 });
    // Every call was looked up twice, when handed over and at its give-up time; sixteen at once (the default).
    const perGeneration = new Map<string, number>();
    for (const id of lookups) perGeneration.set(id, (perGeneration.get(id) ?? 0) + 1);
    expect(perGeneration.size).toBe(100);
    expect(new Set(perGeneration.values())).toEqual(new Set([2]));
    expect(most).toBe(16);
  });

  test("lookups run RECONCILE_CONCURRENCY at once, never more", async () => {
    const calls = 8;
    const slots = 4;
    // Each lookup waits until `slots` are waiting (or all that are left are): one at a time, none would ever go.
    let waiting: Array<() => void> = [];
    let finished = 0;
    let inFlight = 0;
    let most = 0;
    const releaseWhenFull = () => {
      if (waiting.length === 0 || waiting.length < Math.min(slots, calls - finished)) return;
      const go = waiting;
      waiting = [];
      for (const release of go) release();
    };
    const fetchUpstream: FetchUpstream = async (url, init) => {
      if (!isLookup(url)) return t.mock.fetch(new Request(url, init));
      most = Math.max(most, ++inFlight);
      try {
        await new Promise<void>((resolve, reject) => {
          waiting.push(resolve);
          // The upstream client's deadline on its GET ends a lookup that is never let go.
          init.signal?.addEventListener("abort", () => reject(init.signal!.reason), { once: true });
          releaseWhenFull();
        });
        return await t.mock.fetch(new Request(url, init));
      } finally {
        inFlight--;
        finished++;
        releaseWhenFull();
      }
    };
    const t = await chatTestApp({ fetchUpstream, env: { DISCONNECT_DRAIN_MS: "30", UPSTREAM_TIMEOUT_MS: "2000", RECONCILE_CONCURRENCY: String(slots) } });
    await t.connect("alice", 5);
    const ids = await leftStreams(t, calls);
    await t.flush();
    expect(finished).toBe(calls);
    expect(most).toBe(slots);
    for (const id of ids) expect(await rowOf(t, id)).toMatchObject({ status: "client_disconnected", source: "generation" });
    expect(t.app.decorator.reconciler.stats).toMatchObject({ fromRecords: calls, atReservation: 0 });
  });

  test("a lookup that hangs holds its own slot and nothing else: the other calls are settled meanwhile", async () => {
    let hung: { generationId: string; release: () => void; aborted: boolean } | null = null;
    const fetchUpstream: FetchUpstream = async (url, init) => {
      if (isLookup(url) && hung === null) {
        const held = { generationId: lookedUpId(url), release: () => {}, aborted: false };
        hung = held;
        await new Promise<void>((resolve, reject) => {
          held.release = resolve;
          init.signal?.addEventListener("abort", () => ((held.aborted = true), reject(init.signal!.reason)), { once: true });
        });
      }
      return t.mock.fetch(new Request(url, init));
    };
    // Two slots: one for the lookup that hangs, the other for the seven other calls, one after another.
    const t = await chatTestApp({ fetchUpstream, env: { DISCONNECT_DRAIN_MS: "30", RECONCILE_CONCURRENCY: "2" } });
    await t.connect("alice", 5);
    const ids = await leftStreams(t, 8);
    const round = t.app.decorator.reconciler.runRound();
    await until("the other seven calls settled", async () => (await reconciling(t)) === 1);
    const held = hung!;
    expect(held.aborted).toBe(false);
    const [left] = await t.deps.store.callJournal.ownedBy(t.deps.instanceId);
    expect(left!.generationId).toBe(held.generationId);

    held.release();
    await round;
    await t.deps.usageWriter.flush();
    for (const id of ids) expect(await rowOf(t, id)).toMatchObject({ status: "client_disconnected", source: "generation" });
    expect(t.app.decorator.reconciler.stats).toMatchObject({ fromRecords: 8, atReservation: 0 });
  });
});

describe("stopping the reconciler", () => {
  test("waits for the writes under way, not for a lookup that hangs; what that lookup answers afterwards is not written", async () => {
    let release = () => {};
    let hungId: string | null = null;
    const fetchUpstream: FetchUpstream = async (url, init) => {
      if (isLookup(url) && hungId === null) {
        hungId = lookedUpId(url);
        await new Promise<void>((resolve) => (release = resolve));
      }
      return t.mock.fetch(new Request(url, init));
    };
    const t = await chatTestApp({ fetchUpstream, env: { DISCONNECT_DRAIN_MS: "30", RECONCILE_CONCURRENCY: "2" } });
    await t.connect("alice", 5);
    await leftStreams(t, 2);
    const reconciler = t.app.decorator.reconciler;
    const round = reconciler.runRound();
    await until("the other call settled", async () => (await reconciling(t)) === 1);
    const stopped = await Promise.race([reconciler.stop().then(() => "stopped"), Bun.sleep(POLL_BOUND_MS).then(() => "still waiting")]);
    expect(stopped).toBe("stopped");

    // The upstream answers after the stop: the call stays in the journal as its claim left it, held, for the next owner.
    release();
    await round;
    await t.deps.usageWriter.flush();
    const [left] = await t.deps.store.callJournal.ownedBy(t.deps.instanceId);
    expect(left).toMatchObject({ generationId: hungId, attempts: 0, reconcileReason: "client_disconnected" });
    expect(await t.deps.store.usageLedger.find(left!.requestId)).toBeNull();
    expect(reconciler.stats).toMatchObject({ fromRecords: 1, atReservation: 0 });
    expect((await t.deps.budget.snapshot(`u/${t.appId}/2026-01/alice`)).reservedNano).toBe(left!.reservedNano);
  });
});

describe("the reconciler gives up in time, not in steps", () => {
  test("a call whose record never comes is looked up last, and charged its reservation, RECONCILE_GIVE_UP_SECONDS after its hand-over", async () => {
    const lookups: string[] = [];
    const fetchUpstream: FetchUpstream = (url, init) => {
      if (isLookup(url)) lookups.push(lookedUpId(url));
      return t.mock.fetch(new Request(url, init));
    };
    const t = await chatTestApp({ fetchUpstream, env: { DISCONNECT_DRAIN_MS: "30", RECONCILE_GIVE_UP_SECONDS: "30" }, mock: WITHHELD });
    await t.connect("alice", 5);
    const res = await t.chat(ask("[[mock tokens=30 pause_ms=20 no_cancel]]"));
    // The call ran twenty seconds before its client left: the wait counts from the hand-over, not from the start.
    t.clock.advance(20_000);
    const handedOver = t.clock.now();
    await leaveAfterFirstChunk(res);
    const requestId = res.headers.get("x-request-id")!;
    await t.flush();
    expect(lookups).toHaveLength(1);

    // 29 s on, a second lookup (its backoff long over): nothing yet, and the next would be 4 s on, past the give-up time.
    t.clock.set(handedOver + 29_000);
    await t.flush();
    expect(lookups).toHaveLength(2);
    expect(await t.deps.store.callJournal.find(requestId)).toMatchObject({ attempts: 2 });
    // So the next is at the give-up time itself, and not before.
    t.clock.set(handedOver + 29_999);
    await t.flush();
    expect(lookups).toHaveLength(2);
    expect(await t.deps.store.usageLedger.find(requestId)).toBeNull();

    t.clock.set(handedOver + 30_000);
    await t.flush();
    expect(lookups).toHaveLength(3);
    const row = await rowOf(t, requestId);
    expect(row).toMatchObject({ status: "client_disconnected", source: "reservation" });
    expect(row.costNano).toBe(row.reservedNano!);
    expect(await t.deps.store.callJournal.find(requestId)).toBeNull();
  });
});
