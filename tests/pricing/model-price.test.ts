/**
 * Reading a catalogue entry (shared spec: PublicPricing) into nano-dollars, and the
 * refusals that depend on prices the mock upstream does not publish (image output).
 */
import { describe, expect, test } from "bun:test";
import { memoryLogger } from "../../src/logger";
import { parseModelPrice } from "../../src/pricing/model-price";
import { PricingCatalogue } from "../../src/pricing/catalogue";
import { readRequestShape } from "../../src/pricing/request-shape";
import { costBounds } from "../../src/pricing/worst-case";
import { ApiError } from "../../src/errors";

const entry = (pricing: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  id: "x/model",
  context_length: 200_000,
  top_provider: { max_completion_tokens: 8192 },
  pricing: { prompt: "0.000003", completion: "0.000015", ...pricing },
  ...extra,
});

describe("parseModelPrice", () => {
  test("every dimension in nano-dollars; the 1-hour cache write folds into the cache-write rate at the higher price", () => {
    const price = parseModelPrice(
      entry({ request: "0.002", image: "0.0048", web_search: "0.004", input_cache_write: "0.00000375", input_cache_write_1h: "0.000006" }),
    )!;
    expect(price).toMatchObject({
      prompt: 3000,
      completion: 15000,
      request: 2_000_000,
      image: 4_800_000,
      webSearch: 4_000_000,
      variable: false,
      variableKeys: [],
    });
    expect(price.cacheWrite).toBeCloseTo(6000, 6);
    expect(price.maxCompletionTokens).toBe(8192);
  });

  test("conditional overrides count at their highest price per key: a reservation must cover them all", () => {
    const price = parseModelPrice(
      entry({
        overrides: [
          { min_prompt_tokens: 200_000, prompt: "0.000006", completion: "0.0000225" },
          { utc_start: 100, utc_end: 400, prompt: "0.0000015" },
        ],
      }),
    )!;
    expect(price.prompt).toBeCloseTo(6000, 6);
    expect(price.completion).toBeCloseTo(22500, 6);
  });

  test("-1 on prompt or completion is a router; -1 elsewhere is a variable key; a price that is not a number is unreadable", () => {
    expect(parseModelPrice(entry({ prompt: "-1", completion: "-1" }))).toMatchObject({ variable: true, variableKeys: [] });
    expect(parseModelPrice(entry({ web_search: "-1" }))).toMatchObject({ variable: false, variableKeys: ["web_search"] });
    expect(parseModelPrice(entry({ image: "abc" }))).toBeNull();
    expect(parseModelPrice({ id: "x/no-price" })).toBeNull();
  });

  test("a model reasons when it takes reasoning parameters or prices reasoning", () => {
    expect(parseModelPrice(entry({}, { supported_parameters: ["reasoning"] }))!.reasons).toBe(true);
    expect(parseModelPrice(entry({ internal_reasoning: "0.00001" }))!.reasons).toBe(true);
    expect(parseModelPrice(entry({}, { supported_parameters: ["tools"] }))!.reasons).toBe(false);
  });
});

describe("costBounds refusals", () => {
  test("image output on a model priced per generated image is refused; text output on it is not", async () => {
    const listing = [entry({ image_output: "0.04" }, { id: "x/painter" })];
    const catalogue = new PricingCatalogue(async () => listing, { promptUsdPerToken: 1e-5, completionUsdPerToken: 1e-5, contextTokens: 1000 }, memoryLogger());
    await catalogue.refresh();
    const bounds = (body: Record<string, unknown>) =>
      costBounds(catalogue, {
        shape: readRequestShape({ model: "x/painter", messages: [{ role: "user", content: "a cat" }], ...body }, new Map()),
        bodyBytes: 100,
        clientPin: { prompt: Infinity, completion: Infinity, request: Infinity, image: Infinity },
        imageTokenBound: 4096,
      });
    expect(() => bounds({ modalities: ["image", "text"] })).toThrow(ApiError);
    expect(() => bounds({ modalities: ["image", "text"] })).toThrow("billed per generated image on x/painter");
    expect(bounds({ modalities: ["text"] }).models).toHaveLength(1);
  });
});
