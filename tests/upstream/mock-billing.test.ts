/**
 * The mock bills like OpenRouter documents (PublicPricing): a request fee, images, web search
 * results, cache writes and reasoning tokens that run past max_tokens, each checked against a
 * bill computed by hand. Routing (providers, max_price, routers, fallbacks): mock-routing.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { completionText, createMockUpstream, estimatePromptTokens } from "../../packages/mock-upstream/src";
import { validateModels } from "../helpers/openrouter-spec";
import { ask, billingMock, completion, expectBill, PICO, streamed, usd } from "./billing-helpers";

const textTokens = (text: string) => estimatePromptTokens([{ role: "user", content: text }]);

describe("GET /models publishes every price", () => {
  test("extra prices, cache prices only where set, reasoning parameters, a -1 router", async () => {
    const body: any = await (await billingMock().fetch(new Request("http://mock.local/api/v1/models"))).json();
    expect(validateModels(body)).toEqual([]);
    const byId = (id: string) => body.data.find((m: any) => m.id === id);
    expect(byId("bill/fee").pricing).toEqual({
      prompt: "0.000001",
      completion: "0.000002",
      request: "0.002",
      image: "0",
      web_search: "0",
      internal_reasoning: "0",
    });
    expect(byId("bill/vision").pricing.image).toBe("0.003613");
    expect(byId("bill/vision").architecture.input_modalities).toEqual(["text", "image"]);
    expect(byId("bill/search").pricing.web_search).toBe("0.004");
    expect(byId("bill/cache").pricing).toMatchObject({ input_cache_read: "0.0000003", input_cache_write: "0.00000375" });
    expect(byId("bill/fee").pricing.input_cache_write).toBeUndefined();
    expect(byId("bill/reasoner").pricing.internal_reasoning).toBe("0.000009");
    expect(byId("bill/reasoner").supported_parameters).toEqual(expect.arrayContaining(["reasoning", "include_reasoning"]));
    expect(byId("bill/cheap").supported_parameters).not.toContain("reasoning");
    // Listed at the base price: the 3× provider does not show in the listing.
    expect(byId("bill/multi").pricing).toMatchObject({ prompt: "0.000001", completion: "0.000004" });
    expect(byId("bill/auto").pricing).toMatchObject({ prompt: "-1", completion: "-1" });
    expect(byId("bill/o1-pro").context_length).toBe(200000);
  });

  test("plain models publish what they always did", async () => {
    const body: any = await (await createMockUpstream().fetch(new Request("http://mock.local/models"))).json();
    const mini = body.data.find((m: any) => m.id === "openai/gpt-4o-mini");
    expect(mini.pricing).toEqual({
      prompt: "0.00000015",
      completion: "0.0000006",
      request: "0",
      image: "0",
      web_search: "0",
      internal_reasoning: "0",
    });
    expect(mini.architecture.input_modalities).toEqual(["text"]);
  });
});

describe("billed dimensions", () => {
  test("a per-request fee is billed once per generation, JSON and streamed", async () => {
    const mock = billingMock();
    const text = "hi [[mock tokens=10]]";
    const p = textTokens(text);
    const expected = usd(p * PICO.fee.prompt + 10 * PICO.fee.completion + PICO.fee.request);
    const json = await completion(mock, ask("bill/fee", text));
    expect(json).toMatchObject({ model: "bill/fee", provider: "Mock" });
    expectBill(json.usage, mock.served[0]!, expected);
    expect(mock.served[0]).toMatchObject({ servedModel: "bill/fee", provider: "Mock", promptTokens: p, completionTokens: 10 });

    const { chunks, usage } = await streamed(mock, ask("bill/fee", text));
    expect(chunks.every((c) => c.model === "bill/fee" && c.provider === "Mock")).toBe(true);
    expectBill(usage, mock.served[1]!, expected);
  });

  test("each input image costs `image` and adds image_tokens prompt tokens (default 765)", async () => {
    const mock = billingMock();
    const image = { type: "image_url", image_url: { url: "https://example.com/a.png" } };
    const text = "two pictures [[mock tokens=5 image_tokens=1000]]";
    const messages = [{ role: "user", content: [image, { type: "text", text }, image] }];
    const json = await completion(mock, { model: "bill/vision", messages });
    const p = textTokens(text) + 2 * 1000;
    expect(json.usage.prompt_tokens).toBe(p);
    expectBill(json.usage, mock.served[0]!, usd(p * PICO.vision.prompt + 5 * PICO.vision.completion + 2 * PICO.vision.image));
    expect(mock.served[0]!.images).toBe(2);

    const one = [{ role: "user", content: [image, { type: "text", text: "one [[mock tokens=1]]" }] }];
    const single = await completion(mock, { model: "bill/vision", messages: one });
    const p1 = textTokens("one [[mock tokens=1]]") + 765;
    expectBill(single.usage, mock.served[1]!, usd(p1 * PICO.vision.prompt + PICO.vision.completion + PICO.vision.image));
  });

  test("web search bills `web_search` per result and adds result_tokens per result (default 300)", async () => {
    const mock = billingMock();
    const text = "news [[mock tokens=4 result_tokens=100]]";
    const json = await completion(mock, ask("bill/search", text, { plugins: [{ id: "web", max_results: 3 }] }));
    const p = textTokens(text) + 3 * 100;
    expect(json.usage.prompt_tokens).toBe(p);
    expect(json.usage.server_tool_use_details).toEqual({ web_search_requests: 1 });
    expectBill(json.usage, mock.served[0]!, usd(p * PICO.search.prompt + 4 * PICO.search.completion + 3 * PICO.search.result));
    expect(mock.served[0]!.webResults).toBe(3);

    // `:online` is the web plugin with its defaults: 5 results; the answer names the model itself.
    const online = await completion(mock, ask("bill/search:online", "x [[mock tokens=1]]"));
    expect(online.model).toBe("bill/search");
    const pOnline = textTokens("x [[mock tokens=1]]") + 5 * 300;
    expectBill(online.usage, mock.served[1]!, usd(pOnline * PICO.search.prompt + PICO.search.completion + 5 * PICO.search.result));

    // enabled: false turns it off, for a :online model too.
    const off = await completion(mock, ask("bill/search:online", "x [[mock tokens=1]]", { plugins: [{ id: "web", enabled: false }] }));
    expect(off.usage.server_tool_use_details).toBeUndefined();
    expect(mock.served[2]!.webResults).toBe(0);
  });

  test("a cache_control breakpoint bills the whole prompt at input_cache_write", async () => {
    const mock = billingMock();
    const text = "a long system prompt [[mock tokens=6]]";
    const messages = [{ role: "user", content: [{ type: "text", text, cache_control: { type: "ephemeral" } }] }];
    const json = await completion(mock, { model: "bill/cache", messages });
    const p = textTokens(text);
    expect(json.usage.prompt_tokens_details).toEqual({ cached_tokens: 0, cache_write_tokens: p });
    expectBill(json.usage, mock.served[0]!, usd(p * PICO.cache.write + 6 * PICO.cache.completion));
    expect(mock.served[0]!.cacheWriteTokens).toBe(p);

    // Top-level cache_control counts too; without it, the prompt price applies.
    const top = await completion(mock, ask("bill/cache", text, { cache_control: { type: "ephemeral" } }));
    expect(top.usage.prompt_tokens_details.cache_write_tokens).toBe(p);
    const plain = await completion(mock, ask("bill/cache", text));
    expect(plain.usage.prompt_tokens_details).toEqual({ cached_tokens: 0 });
    expectBill(plain.usage, mock.served[2]!, usd(p * PICO.cache.prompt + 6 * PICO.cache.completion));
    // A model that prices no cache writes bills a breakpoint at its prompt price.
    const fee = await completion(mock, ask("bill/fee", "x", { cache_control: { type: "ephemeral" } }));
    expect(mock.served[3]!.cacheWriteTokens).toBe(0);
    expect(fee.usage.prompt_tokens_details.cache_write_tokens).toBeUndefined();
  });
});

describe("reasoning", () => {
  const reasonerBill = (p: number, content: number, reasoning: number) =>
    usd(p * PICO.reasoner.prompt + content * PICO.reasoner.completion + reasoning * PICO.reasoner.reasoning);

  test("runs past max_tokens and is billed at internal_reasoning inside completion_tokens", async () => {
    const mock = billingMock();
    const text = "think [[mock tokens=40 reasoning=500]]";
    const json = await completion(mock, ask("bill/reasoner", text, { max_tokens: 16 }));
    expect(json.choices[0].finish_reason).toBe("length");
    expect(json.choices[0].message.content).toBe(completionText(16));
    expect(json.choices[0].message.reasoning).toBe(completionText(500));
    expect(json.usage).toMatchObject({ completion_tokens: 516, completion_tokens_details: { reasoning_tokens: 500 } });
    expectBill(json.usage, mock.served[0]!, reasonerBill(textTokens(text), 16, 500));
    expect(mock.served[0]).toMatchObject({ maxTokens: 16, completionTokens: 516, reasoningTokens: 500, deliveredTokens: 16 });
  });

  test("streamed: reasoning deltas come before the content, and the usage bills them", async () => {
    const mock = billingMock();
    const text = "think [[mock tokens=40 reasoning=500]]";
    const { chunks, usage } = await streamed(mock, ask("bill/reasoner", text, { max_tokens: 16 }));
    const deltas = chunks.map((c) => c.choices[0]?.delta ?? {});
    const firstContent = deltas.findIndex((d) => d.content);
    expect(deltas.slice(firstContent).some((d) => d.reasoning)).toBe(false);
    expect(deltas.map((d) => d.reasoning ?? "").join("")).toBe(completionText(500));
    expect(deltas.map((d) => d.content ?? "").join("")).toBe(completionText(16));
    expectBill(usage, mock.served[0]!, reasonerBill(textTokens(text), 16, 500));
  });

  test("only reasoning.max_tokens caps it; disabled or effort none spends none; default 256", async () => {
    const mock = billingMock();
    const text = "think [[mock tokens=4 reasoning=500]]";
    const capped = await completion(mock, ask("bill/reasoner", text, { max_tokens: 16, reasoning: { max_tokens: 100 } }));
    expect(capped.usage.completion_tokens_details.reasoning_tokens).toBe(100);
    expectBill(capped.usage, mock.served[0]!, reasonerBill(textTokens(text), 4, 100));

    for (const off of [{ reasoning: { enabled: false } }, { reasoning: { effort: "none" } }, { reasoning_effort: "none" }]) {
      const json = await completion(mock, ask("bill/reasoner", text, off));
      expect(json.usage.completion_tokens).toBe(4);
      expect(json.choices[0].message.reasoning).toBeNull();
    }
    const byDefault = await completion(mock, ask("bill/reasoner", "think [[mock tokens=1]]"));
    expect(byDefault.usage.completion_tokens_details.reasoning_tokens).toBe(256);
  });

  test("hidden reasoning (exclude) is still billed; models that do not reason ignore reasoning=N", async () => {
    const mock = billingMock();
    const text = "think [[mock tokens=2 reasoning=50]]";
    const hidden = await completion(mock, ask("bill/reasoner", text, { reasoning: { exclude: true } }));
    expect(hidden.choices[0].message.reasoning).toBeNull();
    expectBill(hidden.usage, mock.served[0]!, reasonerBill(textTokens(text), 2, 50));
    const plain = await completion(mock, ask("bill/cheap", text));
    expect(plain.usage.completion_tokens).toBe(2);
    expect(mock.served[1]!.reasoningTokens).toBe(0);
  });
});
