/**
 * The hard cap without a price list to trust (ARCHITECTURE.md §3 "The hard cap": no price
 * list is no excuse): while the upstream's GET /models fails, every model is bounded as one
 * that reasons; an empty or failed listing is retried every few seconds; a request that asks
 * for reasoning is bounded whatever its model's entry says; and contradictory reasoning
 * fields go upstream as the one ask that was reserved for. Each case reads what the mock
 * was sent and what was reserved for it (the response's x-metering-* headers).
 */
import { describe, expect, test } from "bun:test";
import { BILLING_MODELS, DEFAULT_MODELS, DEFAULT_SUPPORTED_PARAMETERS, type MockModel } from "../../packages/mock-upstream/src";
import { FAILED_LOAD_RETRY_MS } from "../../src/pricing/catalogue";
import { FakeTimers } from "../helpers/fake-timers";
import { expectWithinCap, spend } from "../helpers/billed-spend";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";

const reasoner = BILLING_MODELS.find((m) => m.id === "bill/reasoner")!;
/** A model that reasons (and is billed for it) while its listing says nothing of reasoning. */
const quietReasoner: MockModel = {
  ...reasoner,
  id: "bill/quiet-reasoner",
  pricing: { prompt: "0.0000011", completion: "0.0000044" },
  supportedParameters: [...DEFAULT_SUPPORTED_PARAMETERS],
};
const models = () => [...DEFAULT_MODELS, ...BILLING_MODELS, quietReasoner].map((m) => ({ ...m, pricing: { ...m.pricing } }));

/** The fallback prices (config defaults) in nano-dollars per token: $15/M prompt, $75/M completion. */
const FALLBACK = { prompt: 15_000, output: 75_000 };
/** openai/gpt-4o-mini as listed: $0.15/M prompt, $0.60/M completion, no reasoning. */
const MINI = { prompt: 150, output: 600 };
/** bill/reasoner as listed: $1.10/M prompt; reasoning at $9/M, dearer than its completion. */
const REASONER = { prompt: 1_100, output: 9_000 };

const say = (text: string, directives: string) => [{ role: "user", content: `${text} [[mock ${directives}]]` }];
const hi = (extra: Record<string, unknown> = {}) => ({ model: "openai/gpt-4o-mini", max_tokens: 100, messages: [{ role: "user", content: "hi" }], ...extra });

interface SentBody {
  max_tokens: number;
  reasoning?: Record<string, unknown> & { max_tokens?: number };
  reasoning_effort?: unknown;
}
const sentBody = (t: ChatTestApp): SentBody => t.mock.served.at(-1)!.body as SentBody;

/**
 * The worst case of a call sent with these limits, in USD: the prompt bounded by the body's
 * bytes at the input rate, plus max_tokens and the reasoning budget at the output rate.
 */
const worstCaseUsd = (body: Record<string, unknown>, sent: SentBody, rates: { prompt: number; output: number }) =>
  (Buffer.byteLength(JSON.stringify(body)) * rates.prompt + (sent.max_tokens + (sent.reasoning?.max_tokens ?? 0)) * rates.output) / 1e9;

/** Calls `body` and checks the limits the headers report are the ones the mock was sent. */
async function callAndRead(t: ChatTestApp, body: Record<string, unknown>) {
  const res = await t.chat(body);
  expect(res.status).toBe(200);
  const sent = sentBody(t);
  expect(res.headers.get("x-metering-max-tokens")).toBe(String(sent.max_tokens));
  const reasoningHeader = res.headers.get("x-metering-reasoning-max-tokens");
  expect(reasoningHeader).toBe(sent.reasoning?.max_tokens === undefined ? null : String(sent.reasoning.max_tokens));
  return { sent, reservedUsd: Number(res.headers.get("x-metering-reserved-usd")) };
}

describe("while the upstream's GET /models fails, every model may reason", () => {
  test("a model nothing is known of gets a reasoning budget, reserved at the fallback price and sent as reasoning.max_tokens", async () => {
    const listing = { down: true, asked: 0 };
    const t = await chatTestApp({ mock: { models: models() }, modelsListing: listing });
    expect(t.deps.catalogue.size).toBe(0);
    await t.connect("alice", 5);
    // gpt-4o-mini does not reason, but nothing here says so: it is bounded as a model that does.
    const body = hi();
    const { sent, reservedUsd } = await callAndRead(t, body);
    expect(sent.max_tokens).toBe(100);
    expect(sent.reasoning).toEqual({ max_tokens: 1024 });
    expect(reservedUsd).toBeCloseTo(worstCaseUsd(body, sent, FALLBACK), 9);
  });

  test("reasoning.max_tokens: 100000 on a $0.50 cap cannot make the upstream bill past the cap", async () => {
    const t = await chatTestApp({ mock: { models: models() }, modelsListing: { down: true, asked: 0 } });
    await t.connect("u", 0.5);
    // The mock reasons 100,000 tokens unless reasoning.max_tokens says fewer ($0.90 at its $9/M).
    const run = await spend(t, "u", () => ({
      model: "bill/reasoner",
      reasoning: { max_tokens: 100_000 },
      messages: say("think", "tokens=100000 reasoning=100000"),
    }));
    await expectWithinCap(t, "u", 0.5, run);
    for (const served of t.mock.served) {
      const sent = served.body as SentBody;
      expect(sent.reasoning!.max_tokens).toBeLessThan(100_000);
      expect(served.costUsd).toBeGreaterThan(0);
    }
  });

  test("an empty listing is retried every few seconds; once it loads, the listing's prices and word on reasoning apply", async () => {
    const timers = new FakeTimers();
    const listing = { down: true, asked: 0 };
    const t = await chatTestApp({ mock: { models: models() }, modelsListing: listing, pricingTimers: timers, env: { PRICING_REFRESH_SECONDS: "600" } });
    await t.connect("alice", 5);
    const catalogue = t.deps.catalogue;
    catalogue.start(600);
    // The load the beat starts is joined by refresh(), so each step waits for its outcome, not for time.
    const beat = async (ms: number) => {
      timers.advance(ms);
      await catalogue.refresh();
    };
    try {
      expect(listing.asked).toBe(1);
      expect(timers.delays).toEqual([FAILED_LOAD_RETRY_MS]);
      await beat(FAILED_LOAD_RETRY_MS);
      expect(listing.asked).toBe(2);
      expect(catalogue.size).toBe(0);
      expect(timers.delays).toEqual([FAILED_LOAD_RETRY_MS]);
      expect((await callAndRead(t, hi())).sent.reasoning).toEqual({ max_tokens: 1024 });

      // The upstream recovers: the next retry, seconds later, loads the listing.
      listing.down = false;
      await beat(FAILED_LOAD_RETRY_MS);
      expect(listing.asked).toBe(3);
      expect(catalogue.size).toBeGreaterThan(0);
      expect(catalogue.fresh).toBe(true);
      // Loaded: back to the configured interval.
      expect(timers.delays).toEqual([600_000]);
      const body = hi();
      const { sent, reservedUsd } = await callAndRead(t, body);
      expect(sent.reasoning).toBeUndefined();
      expect(reservedUsd).toBeCloseTo(worstCaseUsd(body, sent, MINI), 9);
      expect((await t.app.handle(new Request("http://localhost/readyz"))).status).toBe(200);
    } finally {
      catalogue.stop();
    }
    expect(timers.delays).toEqual([]);
  });
});

describe("a stale listing (its last load failed) is not trusted to say a model does not reason", () => {
  test("its prices stand, every model gets a reasoning budget until a load succeeds again", async () => {
    const timers = new FakeTimers();
    const listing = { down: false, asked: 0 };
    const t = await chatTestApp({ mock: { models: models() }, modelsListing: listing, pricingTimers: timers });
    await t.connect("alice", 5);
    const catalogue = t.deps.catalogue;
    catalogue.start(600);
    try {
      expect(catalogue.fresh).toBe(true);
      expect((await callAndRead(t, hi())).sent.reasoning).toBeUndefined();

      listing.down = true;
      timers.advance(600_000);
      await catalogue.refresh();
      expect(catalogue.size).toBeGreaterThan(0);
      expect(catalogue.fresh).toBe(false);
      // Retried on the short beat while it fails.
      expect(timers.delays).toEqual([FAILED_LOAD_RETRY_MS]);
      const body = hi();
      const stale = await callAndRead(t, body);
      expect(stale.sent.reasoning).toEqual({ max_tokens: 1024 });
      // The last good prices still price it, not the fallback's.
      expect(stale.reservedUsd).toBeCloseTo(worstCaseUsd(body, stale.sent, MINI), 9);

      listing.down = false;
      timers.advance(FAILED_LOAD_RETRY_MS);
      await catalogue.refresh();
      expect(catalogue.fresh).toBe(true);
      expect((await callAndRead(t, hi())).sent.reasoning).toBeUndefined();
    } finally {
      catalogue.stop();
    }
  });
});

describe("a request that asks for reasoning is bounded whatever its model's entry says", () => {
  test("reasoning.max_tokens on a model listed without reasoning is clamped and reserved; the upstream's bill stays within the cap", async () => {
    const t = await chatTestApp({ mock: { models: models() } });
    expect(t.deps.catalogue.fresh).toBe(true);
    await t.connect("u", 0.05);
    // Its listing names no reasoning parameter or price, yet the mock reasons (at its completion price).
    const body = () => ({
      model: "bill/quiet-reasoner",
      max_tokens: 16,
      reasoning: { max_tokens: 100_000 },
      messages: say("think", "tokens=100000 reasoning=100000"),
    });
    const run = await spend(t, "u", body);
    await expectWithinCap(t, "u", 0.05, run);
  });

  test("an effort on a model listed without reasoning becomes a budget, sent and reserved", async () => {
    const t = await chatTestApp({ mock: { models: models() } });
    await t.connect("alice", 5);
    const body = hi({ max_tokens: 4000, reasoning_effort: "high" });
    const { sent, reservedUsd } = await callAndRead(t, body);
    expect(sent.reasoning).toEqual({ max_tokens: 3200 });
    expect(sent.reasoning_effort).toBeUndefined();
    expect(reservedUsd).toBeCloseTo(worstCaseUsd(body, sent, MINI), 9);
  });
});

describe("contradictory reasoning fields go upstream as the one ask reserved for", () => {
  const cases: Array<[string, Record<string, unknown>, Record<string, unknown>]> = [
    [
      'reasoning_effort "none" beside reasoning.max_tokens: the budget',
      { max_tokens: 100, reasoning_effort: "none", reasoning: { max_tokens: 3000 } },
      { max_tokens: 3000 },
    ],
    [
      "enabled: false beside reasoning.max_tokens: the budget",
      { max_tokens: 100, reasoning: { enabled: false, max_tokens: 2000, exclude: true } },
      { max_tokens: 2000, exclude: true },
    ],
    [
      'effort "none" beside reasoning_effort "high": the effort, as its budget',
      { max_tokens: 4000, reasoning_effort: "high", reasoning: { effort: "none" } },
      { max_tokens: 3200 },
    ],
    [
      'enabled: false beside reasoning_effort "high": the effort, as its budget',
      { max_tokens: 4000, reasoning_effort: "high", reasoning: { enabled: false } },
      { max_tokens: 3200 },
    ],
  ];
  for (const [name, fields, sentReasoning] of cases) {
    test(name, async () => {
      const t = await chatTestApp({ mock: { models: models() } });
      await t.connect("alice", 5);
      const body = { model: "bill/reasoner", messages: say("think", "tokens=100000 reasoning=100000"), ...fields };
      const { sent, reservedUsd } = await callAndRead(t, body);
      expect(sent.reasoning).toEqual(sentReasoning);
      expect(sent.reasoning_effort).toBeUndefined();
      expect(reservedUsd).toBeCloseTo(worstCaseUsd(body, sent, REASONER), 9);
      // The mock reasons to the budget it was sent, and bills no more than was reserved.
      const served = t.mock.served.at(-1)!;
      expect(served.costUsd).toBeGreaterThan(0);
      expect(served.costUsd).toBeLessThanOrEqual(reservedUsd);
    });
  }
});
