/**
 * Who serves, and so what it costs: the priciest provider within provider.max_price, "-1"
 * routers billed at the routed model's prices, `models` fallbacks. Each bill is computed by
 * hand; a request nothing can serve within max_price is OpenRouter's 404.
 */
import { describe, expect, test } from "bun:test";
import { estimatePromptTokens, type MockModel } from "../../packages/mock-upstream/src";
import { ask, billingMock, completion, expectBill, failure, PICO, streamed, usd } from "./billing-helpers";

const textTokens = (text: string) => estimatePromptTokens([{ role: "user", content: text }]);
const TEXT = "route me [[mock tokens=10]]";
const P = textTokens(TEXT);
const tokenBill = (price: { prompt: number; completion: number }, multiplier = 1) => usd(multiplier * (P * price.prompt + 10 * price.completion));

describe("providers and provider.max_price", () => {
  test("without max_price the priciest provider (3×) serves", async () => {
    const mock = billingMock();
    const json = await completion(mock, ask("bill/multi", TEXT));
    expect(json).toMatchObject({ model: "bill/multi", provider: "Triple" });
    expectBill(json.usage, mock.served[0]!, tokenBill(PICO.multi, 3));
  });

  test("a max_price the 3× provider breaks leaves the listed one (1×), JSON and streamed", async () => {
    const mock = billingMock();
    const provider = { max_price: { prompt: 2, completion: 5 } };
    const json = await completion(mock, ask("bill/multi", TEXT, { provider }));
    expect(json.provider).toBe("Listed");
    expectBill(json.usage, mock.served[0]!, tokenBill(PICO.multi));
    const { chunks, usage } = await streamed(mock, ask("bill/multi", TEXT, { provider }));
    expect(chunks.every((c) => c.provider === "Listed")).toBe(true);
    expectBill(usage, mock.served[1]!, tokenBill(PICO.multi));
    expect(mock.served[1]).toMatchObject({ servedModel: "bill/multi", provider: "Listed" });
  });

  test("limits are inclusive (float noise aside) and may be decimal strings", async () => {
    // 0.0000011 × 3 × 1e6 is 3.3000000000000003 in binary floats: still within a limit of 3.3.
    const odd: MockModel = {
      id: "test/odd",
      name: "Test: Odd",
      pricing: { prompt: "0.0000011", completion: "0.0000044" },
      contextLength: 128000,
      maxCompletionTokens: 16384,
      providers: [{ name: "Triple", priceMultiplier: 3 }],
    };
    const mock = billingMock([odd]);
    const json = await completion(mock, ask("bill/multi", TEXT, { provider: { max_price: { prompt: "3", completion: "12" } } }));
    expect(json.provider).toBe("Triple");
    const noisy = await completion(mock, ask("test/odd", TEXT, { provider: { max_price: { prompt: 3.3, completion: "13.2" } } }));
    expect(noisy.provider).toBe("Triple");
    await failure(mock, ask("test/odd", TEXT, { provider: { max_price: { prompt: 3.29 } } }), 404);
  });

  test("nothing within max_price is a 404, also for a model with one provider, and for the request fee", async () => {
    const mock = billingMock();
    const message = await failure(mock, ask("bill/multi", TEXT, { provider: { max_price: { prompt: 0.5 } } }), 404);
    expect(message).toStartWith("No endpoints found matching your max price.");
    await failure(mock, ask("bill/pricey", TEXT, { provider: { max_price: { completion: 59 } } }), 404);
    await failure(mock, ask("bill/fee", TEXT, { provider: { max_price: { request: 0.001 } } }), 404);
    await failure(mock, ask("bill/vision", TEXT, { provider: { max_price: { image: "0.003" } } }), 404);
    expect(mock.served.map((s) => [s.servedModel, s.costUsd])).toEqual(Array(4).fill(["", 0]));
    await completion(mock, ask("bill/fee", TEXT, { provider: { max_price: { request: "0.002" } } }));
  });

  test("a malformed max_price is a 400", async () => {
    await failure(billingMock(), ask("bill/multi", TEXT, { provider: { max_price: { prompt: "cheap" } } }), 400);
  });

  test("the provider's multiplier applies to every billed dimension", async () => {
    const everything: MockModel = {
      id: "test/everything",
      name: "Test: Everything",
      pricing: {
        prompt: "0.000004",
        completion: "0.000008",
        request: "0.01",
        image: "0.001",
        web_search: "0.002",
        internal_reasoning: "0.00002",
        input_cache_write: "0.000005",
      },
      contextLength: 128000,
      maxCompletionTokens: 16384,
      reasons: true,
      providers: [
        { name: "Base", priceMultiplier: 1 },
        { name: "Double", priceMultiplier: 2 },
      ],
    };
    const mock = billingMock([everything]);
    const text = "all of it [[mock tokens=4 reasoning=10]]";
    const messages = [
      {
        role: "user",
        content: [
          { type: "image_url", image_url: { url: "x" } },
          { type: "text", text },
        ],
      },
    ];
    const json = await completion(mock, { model: "test/everything", messages, plugins: [{ id: "web" }], cache_control: { type: "ephemeral" } });
    const p = textTokens(text) + 765 + 5 * 300;
    expect(json.provider).toBe("Double");
    expect(json.usage.prompt_tokens).toBe(p);
    const picos = p * 5_000_000 + 10_000_000_000 + 1_000_000_000 + 5 * 2_000_000_000 + 4 * 8_000_000 + 10 * 20_000_000;
    expectBill(json.usage, mock.served[0]!, usd(2 * picos));
  });
});

describe("variable-priced routers", () => {
  test("without max_price bill/auto routes to the priciest model it knows, billed at its prices", async () => {
    const mock = billingMock();
    const json = await completion(mock, ask("bill/auto", TEXT));
    expect(json.model).toBe("bill/o1-pro");
    expectBill(json.usage, mock.served[0]!, tokenBill(PICO.o1pro));
    expect(mock.served[0]).toMatchObject({ model: "bill/auto", servedModel: "bill/o1-pro", provider: "Mock" });
    const { chunks } = await streamed(mock, ask("bill/auto", TEXT));
    expect(chunks.every((c) => c.model === "bill/o1-pro")).toBe(true);
  });

  test("with max_price it routes to the first model that fits, or answers 404", async () => {
    const mock = billingMock();
    const json = await completion(mock, ask("bill/auto", TEXT, { provider: { max_price: { prompt: 1, completion: 1 } } }));
    expect(json.model).toBe("bill/cheap");
    expectBill(json.usage, mock.served[0]!, tokenBill(PICO.cheap));
    await failure(mock, ask("bill/auto", TEXT, { provider: { max_price: { prompt: 0.01 } } }), 404);
  });
});

describe("models fallbacks", () => {
  test("fail_over=1 skips the first candidate: the pricey fallback serves and bills", async () => {
    const mock = billingMock();
    const json = await completion(mock, { models: ["bill/cheap", "bill/pricey"], messages: [{ role: "user", content: `${TEXT} [[mock fail_over=1]]` }] });
    expect(json.model).toBe("bill/pricey");
    const p = textTokens(`${TEXT} [[mock fail_over=1]]`);
    expectBill(json.usage, mock.served[0]!, usd(p * PICO.pricey.prompt + 10 * PICO.pricey.completion));
    expect(mock.served[0]).toMatchObject({ model: "bill/cheap", servedModel: "bill/pricey" });
  });

  test("model comes first and is not repeated; without fail_over it serves", async () => {
    const mock = billingMock();
    const messages = [{ role: "user", content: "x [[mock fail_over=1]]" }];
    const json = await completion(mock, { model: "bill/cheap", models: ["bill/cheap", "bill/pricey"], messages });
    expect(json.model).toBe("bill/pricey");
    const first = await completion(mock, { model: "bill/cheap", models: ["bill/pricey"], messages: [{ role: "user", content: "x" }] });
    expect(first.model).toBe("bill/cheap");
  });

  test("fallbacks that do not fit max_price are skipped", async () => {
    const mock = billingMock();
    const json = await completion(mock, {
      models: ["bill/pricey", "bill/cheap"],
      messages: [{ role: "user", content: "x" }],
      provider: { max_price: { prompt: 1 } },
    });
    expect(json.model).toBe("bill/cheap");
  });

  test("every candidate down is a 404; an unknown id or a malformed list is a 400", async () => {
    const mock = billingMock();
    const down = await failure(mock, { models: ["bill/cheap", "bill/pricey"], messages: [{ role: "user", content: "[[mock fail_over=2]]" }] }, 404);
    expect(down).toStartWith("No endpoints found for");
    expect(await failure(mock, { models: ["bill/cheap", "nope/x"], messages: [{ role: "user", content: "x" }] }, 400)).toBe("nope/x is not a valid model ID");
    await failure(mock, { models: "bill/cheap", messages: [{ role: "user", content: "x" }] }, 400);
    expect(await failure(mock, { models: [], messages: [{ role: "user", content: "x" }] }, 400)).toBe("No models provided");
  });
});
