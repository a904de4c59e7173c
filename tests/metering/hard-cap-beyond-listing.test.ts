/**
 * The hard cap against what the upstream bills beyond its listing (the mock bills as
 * OpenRouter and the providers document, packages/mock-upstream/src/billing.ts): web results from
 * OpenRouter's engine on models listing no web_search price (`:free` ones included), an
 * Anthropic model's tool-use prompt, and premium service tiers and fast mode.
 *
 * Each case spends twice on a small cap: 40 calls at once for one user, then one call at a
 * time for another until the budget refuses. Both times the upstream's bill stays within
 * the cap and equals the ledger, no call costs more than it reserved (an overrun, which
 * freezes the user), and no refusal is such a freeze below 90 % of the cap.
 */
import { describe, expect, test } from "bun:test";
import { BILLING_MODELS } from "../../packages/mock-upstream/src";
import { billsByUser, expectWithinCap, type Run } from "../helpers/billed-spend";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";

/** The mock bills every completion token max_tokens allows: completions fill the reservation. */
const FULL = "tokens=100000";
/** Rates at least the mock's (priority 2×, fast mode 6×), as an operator would set them from the providers' price lists. */
const TIERS = "priority=2,fast=6";

const app = () =>
  chatTestApp({
    mock: { models: BILLING_MODELS.map((m) => ({ ...m, pricing: { ...m.pricing } })) },
    env: { RL_CHAT_LIMIT: "1000", SERVICE_TIER_PRICE_MULTIPLIERS: TIERS },
  });

const say = (text: string, directives: string) => [{ role: "user", content: `${text} [[mock ${directives}]]` }];
const tools = [
  { type: "function", function: { name: "lookup", description: "Look a word up", parameters: { type: "object", properties: { word: { type: "string" } } } } },
];

/**
 * A tool call whose prompt the mock bills at one token per byte of the body, the densest a
 * body can be: only the provider's tool-use prompt is left above the body's bound.
 */
function denseToolCall(): Record<string, unknown> {
  const body = (tokens: string) => ({
    model: "anthropic/claude-opus-4",
    max_tokens: 16,
    tools,
    messages: say("a".repeat(600), `${FULL} prompt_tokens=${tokens}`),
  });
  const bytes = JSON.stringify(body("00000")).length;
  return body(String(bytes).padStart(5, "0"));
}

interface Case {
  name: string;
  capUsd: number;
  body: () => Record<string, unknown>;
}

const CASES: Case[] = [
  {
    name: "web: a :free:online model, its engine results at $0.004",
    capUsd: 0.05,
    body: () => ({ model: "bill/llama:free:online", max_tokens: 16, messages: say("news", FULL) }),
  },
  {
    name: "web: max_results 10 on a cheap model listing web_search as 0",
    capUsd: 0.1,
    body: () => ({ model: "bill/cheap", max_tokens: 16, plugins: [{ id: "web", max_results: 10 }], messages: say("news", `${FULL} result_tokens=2000`) }),
  },
  {
    name: "web: :online on a model whose listing leaves web_search out",
    capUsd: 0.05,
    body: () => ({ model: "bill/unpriced-search:online", max_tokens: 16, messages: say("news", FULL) }),
  },
  {
    name: "web: a free model falling back to one without a web_search price",
    capUsd: 0.05,
    body: () => ({
      model: "bill/llama:free",
      models: ["bill/unpriced-search"],
      max_tokens: 16,
      plugins: [{ id: "web" }],
      messages: say("news", `${FULL} fail_over=1`),
    }),
  },
  {
    name: "web: a variable-priced router under the client's price pin",
    capUsd: 0.1,
    body: () => ({
      model: "bill/auto",
      provider: { max_price: { prompt: 0.1, completion: 0.4 } },
      max_tokens: 16,
      plugins: [{ id: "web" }],
      messages: say("news", FULL),
    }),
  },
  { name: "tools: an Opus-priced Anthropic model adds its tool-use prompt", capUsd: 0.05, body: denseToolCall },
  {
    name: "tier: service_tier priority at 2×",
    capUsd: 0.05,
    body: () => ({ model: "bill/pricey", service_tier: "priority", max_tokens: 300, messages: say("hi", FULL) }),
  },
  {
    name: "tier: service_tier auto, which may run on priority",
    capUsd: 0.05,
    body: () => ({ model: "bill/pricey", service_tier: "auto", max_tokens: 300, messages: say("hi", FULL) }),
  },
  {
    name: "tier: speed fast, Anthropic's fast mode at 6×",
    capUsd: 0.2,
    body: () => ({ model: "anthropic/claude-opus-4", speed: "fast", max_tokens: 100, messages: say("hi", FULL) }),
  },
];

interface Spent extends Run {
  /** The `error` of every 402. */
  refusals: Array<{ message: string; usedUsd: number; limitUsd: number }>;
}

async function record(responses: Response[], into: Spent): Promise<void> {
  for (const r of responses) {
    into.statuses.push(r.status);
    if (r.status === 402) into.refusals.push(((await r.json()) as { error: Spent["refusals"][number] }).error);
    else await r.arrayBuffer();
  }
}

/** `n` calls at once. */
async function burst(t: ChatTestApp, user: string, body: () => Record<string, unknown>, n = 40): Promise<Spent> {
  const spent: Spent = { statuses: [], refusals: [] };
  await record(await Promise.all(Array.from({ length: n }, () => t.chat(body(), { "x-service-user": user }))), spent);
  return spent;
}

/** One call at a time until the budget refuses (at most `max`). */
async function oneAtATime(t: ChatTestApp, user: string, body: () => Record<string, unknown>, max = 60): Promise<Spent> {
  const spent: Spent = { statuses: [], refusals: [] };
  while (spent.statuses.length < max && !spent.statuses.includes(402)) await record([await t.chat(body(), { "x-service-user": user })], spent);
  return spent;
}

/** A call that cost more than it reserved freezes its user; none may do so below 90 % of the cap. */
function expectNoEarlyFreeze(spent: Spent): void {
  for (const refusal of spent.refusals) {
    const frozen = refusal.message.includes("cost more than it reserved");
    expect(frozen && refusal.usedUsd < 0.9 * refusal.limitUsd, `frozen at ${refusal.usedUsd} of ${refusal.limitUsd}`).toBe(false);
  }
}

describe("the hard cap holds against what the upstream bills beyond its listing", () => {
  for (const { name, capUsd, body } of CASES) {
    test(name, async () => {
      const t = await app();
      await t.connect("burst", capUsd);
      await t.connect("steady", capUsd);
      const many = await burst(t, "burst", body);
      await expectWithinCap(t, "burst", capUsd, many);
      expectNoEarlyFreeze(many);
      const steady = await oneAtATime(t, "steady", body);
      await expectWithinCap(t, "steady", capUsd, steady);
      expectNoEarlyFreeze(steady);
    });
  }
});

describe("no call the upstream bills was reserved at $0", () => {
  test("every billed call of every case reserved at least its bill", async () => {
    const t = await app();
    await t.connect("alice", 100);
    for (const { name, body } of [
      ...CASES,
      { name: "a free model, nothing billed", body: () => ({ model: "bill/llama:free", max_tokens: 16, messages: say("hi", FULL) }) },
    ]) {
      const res = await t.chat(body());
      expect(res.status, name).toBe(200);
      await res.arrayBuffer();
      const billed = t.mock.served.at(-1)!.costUsd;
      const reserved = Number(res.headers.get("x-metering-reserved-usd"));
      if (billed > 0) expect(reserved, name).toBeGreaterThan(0);
      expect(reserved, name).toBeGreaterThanOrEqual(billed);
    }
    expect([...(await billsByUser(t)).keys()]).toEqual(["alice"]);
  });
});
