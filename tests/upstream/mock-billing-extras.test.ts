/**
 * What the mock bills beyond the listing, as OpenRouter and the providers document it: web
 * results from OpenRouter's engine ($0.004 each) where the model lists no web_search price,
 * Anthropic's tool-use prompt (346 tokens, 313 with a forced tool), and premium service
 * tiers and fast mode at the mock's multipliers (packages/mock-upstream/src/billing.ts). Each bill is
 * computed by hand in pico-dollars.
 */
import { describe, expect, test } from "bun:test";
import { estimatePromptTokens } from "../../packages/mock-upstream/src";
import { ask, billingMock, completion, expectBill, failure, PICO, streamed, usd } from "./billing-helpers";

const textTokens = (text: string) => estimatePromptTokens([{ role: "user", content: text }]);
const TEXT = "x [[mock tokens=10 result_tokens=100]]";
const P = textTokens(TEXT);
const tokenBill = (price: { prompt: number; completion: number }, prompt = P) => prompt * price.prompt + 10 * price.completion;
const tools = [{ type: "function", function: { name: "f", parameters: { type: "object" } } }];

describe("web results from OpenRouter's engine", () => {
  test("a :free:online model is billed $0.004 a result, though its tokens are free", async () => {
    const mock = billingMock();
    const json = await completion(mock, ask("bill/llama:free:online", TEXT));
    expect(json.model).toBe("bill/llama:free");
    expectBill(json.usage, mock.served[0]!, usd(5 * PICO.engineResult));
  });

  test("web_search listed as 0 or left out: the engine's price per result; the plugin's max_results counts", async () => {
    const mock = billingMock();
    const listing: any = await (await mock.fetch(new Request("http://mock.local/api/v1/models"))).json();
    expect(listing.data.find((m: any) => m.id === "bill/unpriced-search").pricing.web_search).toBeUndefined();
    expect(listing.data.find((m: any) => m.id === "bill/cheap").pricing.web_search).toBe("0");
    const cheap = await completion(mock, ask("bill/cheap", TEXT, { plugins: [{ id: "web", max_results: 10 }] }));
    expectBill(cheap.usage, mock.served[0]!, usd(tokenBill(PICO.cheap, P + 10 * 100) + 10 * PICO.engineResult));
    const unpriced = await completion(mock, ask("bill/unpriced-search:online", TEXT));
    expectBill(unpriced.usage, mock.served[1]!, usd(tokenBill(PICO.unpricedSearch, P + 5 * 100) + 5 * PICO.engineResult));
  });

  test("the engine's fee is OpenRouter's: a 3× provider triples the tokens, not the results", async () => {
    const mock = billingMock();
    const json = await completion(mock, ask("bill/multi", TEXT, { plugins: [{ id: "web", max_results: 2 }] }));
    expect(json.provider).toBe("Triple");
    expectBill(json.usage, mock.served[0]!, usd(3 * tokenBill(PICO.multi, P + 2 * 100) + 2 * PICO.engineResult));
  });
});

describe("Anthropic's tool-use prompt", () => {
  test("with tools an anthropic/ model bills 346 more prompt tokens, 313 when tool_choice forces a tool", async () => {
    const mock = billingMock();
    const choosing = await completion(mock, ask("anthropic/claude-opus-4", TEXT, { tools }));
    expect(choosing.usage.prompt_tokens).toBe(P + 346);
    expectBill(choosing.usage, mock.served[0]!, usd(tokenBill(PICO.opus, P + 346)));
    for (const tool_choice of ["required", { type: "function", function: { name: "f" } }]) {
      expect((await completion(mock, ask("anthropic/claude-opus-4", TEXT, { tools, tool_choice }))).usage.prompt_tokens).toBe(P + 313);
    }
    expect((await completion(mock, ask("anthropic/claude-opus-4", TEXT, { tools, tool_choice: "none" }))).usage.prompt_tokens).toBe(P + 346);
    const { usage } = await streamed(mock, ask("anthropic/claude-opus-4", TEXT, { tools }));
    expect(usage.prompt_tokens).toBe(P + 346);
  });

  test("without tools, with an empty list, or on another family: nothing is added", async () => {
    const mock = billingMock();
    expect((await completion(mock, ask("anthropic/claude-opus-4", TEXT))).usage.prompt_tokens).toBe(P);
    expect((await completion(mock, ask("anthropic/claude-opus-4", TEXT, { tools: [] }))).usage.prompt_tokens).toBe(P);
    expect((await completion(mock, ask("bill/cheap", TEXT, { tools }))).usage.prompt_tokens).toBe(P);
  });
});

describe("service tiers and fast mode", () => {
  test("priority (and its alias fast, and auto, and scale) bill 2×; default, flex and none the listed prices", async () => {
    const mock = billingMock();
    for (const [service_tier, multiplier] of [
      ["priority", 2],
      ["fast", 2],
      ["auto", 2],
      ["scale", 2],
      ["default", 1],
      ["flex", 1],
      [null, 1],
    ] as const) {
      await completion(mock, ask("bill/cheap", TEXT, { service_tier }));
      expect(mock.served.at(-1)!.costUsd, String(service_tier)).toBeCloseTo(usd(multiplier * tokenBill(PICO.cheap)), 12);
    }
  });

  test("speed fast bills 6×, and with priority 12×; the engine's web results stay at $0.004", async () => {
    const mock = billingMock();
    const fast = await completion(mock, ask("bill/cheap", TEXT, { speed: "fast" }));
    expectBill(fast.usage, mock.served[0]!, usd(6 * tokenBill(PICO.cheap)));
    const both = await completion(mock, ask("bill/cheap", TEXT, { speed: "fast", service_tier: "priority", plugins: [{ id: "web", max_results: 1 }] }));
    expectBill(both.usage, mock.served[1]!, usd(12 * tokenBill(PICO.cheap, P + 100) + PICO.engineResult));
  });

  test("provider.max_price holds at the tier's price: the listed price refuses a priority call, twice it serves", async () => {
    const mock = billingMock();
    const listed = { max_price: { prompt: 0.1, completion: 0.4 } };
    await failure(mock, ask("bill/cheap", TEXT, { service_tier: "priority", provider: listed }), 404);
    await completion(mock, ask("bill/cheap", TEXT, { service_tier: "priority", provider: { max_price: { prompt: 0.2, completion: 0.8 } } }));
    await completion(mock, ask("bill/cheap", TEXT, { provider: listed }));
  });

  test("a service_tier or speed outside the spec's values is a 400", async () => {
    const mock = billingMock();
    await failure(mock, ask("bill/cheap", TEXT, { service_tier: "turbo" }), 400);
    await failure(mock, ask("bill/cheap", TEXT, { speed: "ludicrous" }), 400);
    expect(mock.served.every((s) => s.costUsd === 0)).toBe(true);
  });
});
