/**
 * The hard cap against an upstream that bills the way OpenRouter documents (the mock's
 * BILLING_MODELS): per-request fees, images, web results, cache writes, reasoning priced
 * apart and run past max_tokens, `models` fallbacks to a pricier model, a provider at 3×
 * the listing, and a variable-priced router that picks a $150/$600 per M model.
 *
 * Each case runs concurrent calls and then calls one at a time until the budget refuses,
 * and checks three things: the upstream's own bill and /status stay within the cap, and
 * no call cost more than it reserved. The last check is what makes each case fail when
 * its piece of the worst case is removed: without it, the overrun freeze would stop the
 * damage after one call and hide the hole.
 */
import { describe, expect, test } from "bun:test";
import { BILLING_MODELS } from "../../packages/mock-upstream/src";
import { billsByUser, expectWithinCap, spend } from "../helpers/billed-spend";
import { chatTestApp } from "../helpers/chat-app";

const json = async (r: Response): Promise<any> => r.json();

/** The mock bills every completion token max_tokens allows: completions fill the reservation. */
const FULL = "tokens=100000";

const billingApp = () => chatTestApp({ mock: { models: BILLING_MODELS.map((m) => ({ ...m, pricing: { ...m.pricing } })) } });

const say = (text: string, directives: string) => [{ role: "user", content: `${text} [[mock ${directives}]]` }];

describe("the hard cap holds against OpenRouter's billing", () => {
  test("per-request fee: reserved on every call", async () => {
    const t = await billingApp();
    await t.connect("u", 0.005);
    const run = await spend(t, "u", () => ({ model: "bill/fee", max_tokens: 16, messages: say("hi", FULL) }));
    await expectWithinCap(t, "u", 0.005, run);
  });

  test("images: the per-image price and each image's tokens", async () => {
    const t = await billingApp();
    await t.connect("u", 0.05);
    const image = { type: "image_url", image_url: { url: "https://example.com/cat.png" } };
    const messages = [{ role: "user", content: [{ type: "text", text: `two cats [[mock ${FULL} image_tokens=4000]]` }, image, image] }];
    const run = await spend(t, "u", () => ({ model: "bill/vision", max_tokens: 16, messages }));
    await expectWithinCap(t, "u", 0.05, run);
    expect(t.mock.served.some((s) => s.images === 2 && s.costUsd > 0)).toBe(true);
  });

  test("web search: max_results × the web_search price, and the results' prompt tokens", async () => {
    const t = await billingApp();
    await t.connect("u", 0.05);
    const run = await spend(t, "u", () => ({
      model: "bill/search",
      max_tokens: 16,
      plugins: [{ id: "web", max_results: 5 }],
      messages: say("news", `${FULL} result_tokens=2000`),
    }));
    await expectWithinCap(t, "u", 0.05, run);
    expect(t.mock.served.some((s) => s.webResults === 5)).toBe(true);
  });

  test("web search through an :online model id", async () => {
    const t = await billingApp();
    await t.connect("u", 0.05);
    const run = await spend(t, "u", () => ({ model: "bill/search:online", max_tokens: 16, messages: say("news", `${FULL} result_tokens=2000`) }));
    await expectWithinCap(t, "u", 0.05, run);
  });

  test("cache writes: prompt tokens at the higher cache-write price", async () => {
    const t = await billingApp();
    await t.connect("u", 0.05);
    const long = "a".repeat(4000);
    // The mock bills as many prompt tokens as the body has bytes, less a little: a dense tokenizer.
    const messages = [{ role: "user", content: [{ type: "text", text: `${long} [[mock ${FULL} prompt_tokens=4000]]`, cache_control: { type: "ephemeral" } }] }];
    const run = await spend(t, "u", () => ({ model: "bill/cache", max_tokens: 16, messages }));
    await expectWithinCap(t, "u", 0.05, run);
    expect(t.mock.served.some((s) => s.cacheWriteTokens > 0)).toBe(true);
  });

  test("reasoning: priced apart, and bounded although the model reasons past max_tokens", async () => {
    const t = await billingApp();
    await t.connect("u", 0.05);
    const run = await spend(t, "u", () => ({ model: "bill/reasoner", max_tokens: 16, messages: say("think", `${FULL} reasoning=20000`) }));
    await expectWithinCap(t, "u", 0.05, run);
    const sent = t.mock.served.find((s) => s.costUsd > 0)!.body as { reasoning: { max_tokens: number } };
    expect(sent.reasoning.max_tokens).toBeGreaterThan(0);
  });

  test("reasoning asked for by effort is bounded the same way", async () => {
    const t = await billingApp();
    await t.connect("u", 0.05);
    const run = await spend(t, "u", () => ({
      model: "bill/reasoner",
      max_tokens: 2000,
      reasoning_effort: "high",
      messages: say("think", `${FULL} reasoning=20000`),
    }));
    await expectWithinCap(t, "u", 0.05, run);
  });

  test("models fallbacks: priced at the most expensive model in the list", async () => {
    const t = await billingApp();
    await t.connect("u", 0.05);
    const run = await spend(t, "u", () => ({ models: ["bill/cheap", "bill/pricey"], max_tokens: 300, messages: say("hi", `${FULL} fail_over=1`) }));
    await expectWithinCap(t, "u", 0.05, run);
    expect(t.mock.served.filter((s) => s.costUsd > 0).every((s) => s.servedModel === "bill/pricey")).toBe(true);
  });

  test("a provider at 3× the listing is refused by the price pin", async () => {
    const t = await billingApp();
    await t.connect("u", 0.05);
    const run = await spend(t, "u", () => ({ model: "bill/multi", max_tokens: 2000, messages: say("hi", FULL) }));
    await expectWithinCap(t, "u", 0.05, run);
    expect(t.mock.served.filter((s) => s.costUsd > 0).every((s) => s.provider === "Listed")).toBe(true);
  });

  test("a variable-priced router that picks a $150/$600 per M model", async () => {
    const t = await billingApp();
    await t.connect("u", 0.05);
    const run = await spend(t, "u", () => ({ model: "bill/auto", max_tokens: 100, messages: say("hi", FULL) }));
    await expectWithinCap(t, "u", 0.05, run);
    expect(t.mock.served.filter((s) => s.costUsd > 0).every((s) => s.servedModel === "bill/o1-pro")).toBe(true);
  });

  test("50 concurrent calls mixing every shape, five users on $0.05 caps", async () => {
    const t = await billingApp();
    const users = ["mix-a", "mix-b", "mix-c", "mix-d", "mix-e"];
    for (const user of users) await t.connect(user, 0.05);
    const image = { type: "image_url", image_url: { url: "https://example.com/cat.png" } };
    const shapes: Array<() => Record<string, unknown>> = [
      () => ({ model: "bill/fee", max_tokens: 64, messages: say("hi", FULL) }),
      () => ({
        model: "bill/vision",
        max_tokens: 64,
        messages: [{ role: "user", content: [{ type: "text", text: `[[mock ${FULL} image_tokens=4000]]` }, image] }],
      }),
      () => ({ model: "bill/search", max_tokens: 64, plugins: [{ id: "web" }], messages: say("news", `${FULL} result_tokens=2000`) }),
      () => ({ model: "bill/cache", max_tokens: 64, cache_control: { type: "ephemeral" }, messages: say("a".repeat(2000), `${FULL} prompt_tokens=2000`) }),
      () => ({ model: "bill/reasoner", max_tokens: 64, messages: say("think", `${FULL} reasoning=20000`) }),
      () => ({ model: "bill/cheap", models: ["bill/pricey"], max_tokens: 200, messages: say("hi", `${FULL} fail_over=1`) }),
      () => ({ model: "bill/multi", max_tokens: 1000, messages: say("hi", FULL) }),
      () => ({ model: "bill/auto", max_tokens: 50, stream: true, messages: say("hi", FULL) }),
    ];
    const calls = Array.from({ length: 50 }, (_, i) =>
      t.chat(shapes[i % shapes.length]!(), { "x-service-user": users[i % users.length]! }).then(async (r) => {
        await r.arrayBuffer();
        return r.status;
      }),
    );
    const statuses = await Promise.all(calls);
    expect(
      statuses.every((s) => s === 200 || s === 402),
      `statuses ${statuses}`,
    ).toBe(true);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(5);
    await t.app.decorator.chat.idle(5000); // streams settle after their last byte is read
    const bills = await billsByUser(t);
    for (const user of users) {
      const bill = bills.get(user) ?? 0;
      expect(bill, user).toBeLessThanOrEqual(0.05);
      const status = await json(await t.get(`/api/v1/status?appUserId=${user}`));
      expect(status.usage.monthlyUsd).toBeLessThanOrEqual(0.05);
      expect(status.usage.monthlyUsd).toBeCloseTo(bill, 8);
    }
    const overruns = t.db.query<{ n: number }, []>("SELECT count(*) AS n FROM usage_ledger WHERE overrun_nano > 0").get()!.n;
    expect(overruns).toBe(0);
  });
});
