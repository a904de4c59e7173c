/**
 * What the upstream bills beyond the listing's token prices, priced before a call goes
 * upstream: web results from the upstream's own engine (src/pricing/web-results.ts), a
 * provider's tool-use prompt (tool-prompt.ts), service tiers and fast mode (service-tier.ts),
 * each on its own and inside costBounds; and no billable request reserving $0.
 */
import { describe, expect, test } from "bun:test";
import { ApiError } from "../../src/errors";
import { memoryLogger } from "../../src/logger";
import { PricingCatalogue } from "../../src/pricing/catalogue";
import { readRequestShape } from "../../src/pricing/request-shape";
import { planReservation } from "../../src/pricing/reservation";
import { tierPriceMultiplier } from "../../src/pricing/service-tier";
import { toolPromptTokens, UNKNOWN_FAMILY_TOOL_PROMPT_TOKENS } from "../../src/pricing/tool-prompt";
import { costBounds, type BoundsInput } from "../../src/pricing/worst-case";

const listed = (id: string, pricing: Record<string, string>, context = 200_000) => ({
  id,
  context_length: context,
  top_provider: { max_completion_tokens: 8192 },
  pricing: { prompt: "0.000001", completion: "0.000002", ...pricing },
});

/** OpenRouter lists `web_search` as "0" on most models, leaves it out on some, and a positive price where the model searches natively. */
const LISTING = [
  listed("x/llama:free", { prompt: "0", completion: "0", web_search: "0" }),
  listed("x/unlisted-search", {}),
  listed("x/native-search", { web_search: "0.01" }),
  listed("x/fee-free", { prompt: "0", completion: "0", request: "0.001" }),
  listed("x/router", { prompt: "-1", completion: "-1" }),
  listed("anthropic/claude-opus-4", { prompt: "0.000015", completion: "0.000075" }),
  listed("anthropic/claude-3-opus", { prompt: "0.000015", completion: "0.000075" }),
  listed("x/small", {}, 300),
];

async function catalogue(): Promise<PricingCatalogue> {
  const loaded = new PricingCatalogue(async () => LISTING, { promptUsdPerToken: 1e-5, completionUsdPerToken: 1e-5, contextTokens: 1000 }, memoryLogger());
  await loaded.refresh();
  return loaded;
}

const NO_PIN = { prompt: Infinity, completion: Infinity, request: Infinity, image: Infinity };
const hi = (model: string, extra: Record<string, unknown> = {}) => ({ model, messages: [{ role: "user", content: "hi" }], ...extra });
const tools = [{ type: "function", function: { name: "f", parameters: { type: "object" } } }];

async function boundsOf(body: Record<string, unknown>, extra: Partial<BoundsInput> = {}) {
  return costBounds(await catalogue(), {
    shape: readRequestShape(body, new Map()),
    bodyBytes: 1000,
    clientPin: NO_PIN,
    imageTokenBound: 4096,
    ...extra,
  });
}

/** The fixed costs (fee, images, web results) of the priciest model that may serve. */
const fixedOf = async (body: Record<string, unknown>, extra: Partial<BoundsInput> = {}) =>
  Math.max(...(await boundsOf(body, extra)).models.map((m) => m.fixedNano));

describe("web results from the upstream's engine", () => {
  test("a model listing web_search as 0 or leaving it out reserves each result at $0.004, :free:online included", async () => {
    expect(await fixedOf(hi("x/llama:free:online"))).toBe(5 * 4_000_000);
    expect(await fixedOf(hi("x/llama:free", { plugins: [{ id: "web" }] }))).toBe(5 * 4_000_000);
    expect(await fixedOf(hi("x/unlisted-search", { plugins: [{ id: "web", max_results: 10 }] }))).toBe(10 * 4_000_000);
    expect(await fixedOf(hi("x/unlisted-search", { plugins: [{ id: "web", max_results: 3, max_uses: 2 }] }))).toBe(6 * 4_000_000);
    expect(await fixedOf(hi("x/llama:free"))).toBe(0);
  });

  test("a positive listed web_search price is the model's own and stays; WEB_SEARCH_RESULT_USD sets the engine's", async () => {
    expect(await fixedOf(hi("x/native-search", { plugins: [{ id: "web" }] }))).toBe(5 * 10_000_000);
    expect(await fixedOf(hi("x/llama:free:online"), { engineResultNano: 5_000_000 })).toBe(5 * 5_000_000);
    expect(await fixedOf(hi("x/native-search:online"), { engineResultNano: 5_000_000 })).toBe(5 * 10_000_000);
  });

  test("fallbacks and routers: the priciest model's results", async () => {
    expect(await fixedOf(hi("x/llama:free", { models: ["x/native-search"], plugins: [{ id: "web" }] }))).toBe(5 * 10_000_000);
    const routed = await boundsOf(hi("x/router", { plugins: [{ id: "web" }] }));
    expect(routed.models.every((m) => m.fixedNano >= 5 * 4_000_000)).toBe(true);
  });
});

describe("a provider's tool-use prompt", () => {
  test("the table: Anthropic 346 (the larger of 346 and 313 forced), Claude 3 Opus 530, unknown families the largest", () => {
    expect(toolPromptTokens("anthropic/claude-opus-4")).toBe(346);
    expect(toolPromptTokens("anthropic/claude-3-opus")).toBe(530);
    expect(UNKNOWN_FAMILY_TOOL_PROMPT_TOKENS).toBe(530);
    expect(toolPromptTokens("openai/gpt-4o")).toBe(530);
  });

  test("is added to the prompt bound when tools are sent, within the context length", async () => {
    const promptOf = async (body: Record<string, unknown>) => (await boundsOf(body)).models[0]!.promptTokens;
    expect(await promptOf(hi("anthropic/claude-opus-4"))).toBe(1000);
    expect(await promptOf(hi("anthropic/claude-opus-4", { tools }))).toBe(1000 + 346);
    expect(await promptOf(hi("anthropic/claude-opus-4", { tools, tool_choice: "required" }))).toBe(1000 + 346);
    expect(await promptOf(hi("anthropic/claude-3-opus", { tools }))).toBe(1000 + 530);
    expect(await promptOf(hi("x/unlisted-search", { tools }))).toBe(1000 + 530);
    expect(await promptOf(hi("anthropic/claude-opus-4", { tools: [] }))).toBe(1000);
    expect(await promptOf(hi("x/small", { tools }))).toBe(300);
  });
});

describe("service tiers and fast mode", () => {
  const rate = (body: Record<string, unknown>, configured: Record<string, number> = {}) => tierPriceMultiplier(body, new Map(Object.entries(configured)));
  const refusal = (body: Record<string, unknown>, configured: Record<string, number> = {}) => {
    try {
      rate(body, configured);
    } catch (err) {
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).code).toBe("invalid_request");
      return (err as ApiError).message;
    }
    throw new Error("not refused");
  };

  test("absent, null, default, standard and flex are billed at the listed prices", () => {
    for (const service_tier of [undefined, null, "default", "standard", "flex"]) expect(rate({ service_tier })).toBe(1);
    expect(rate({ speed: "standard" })).toBe(1);
  });

  test("unset, every premium tier and fast mode is refused, naming the setting", () => {
    for (const service_tier of ["priority", "fast", "scale", "auto", "turbo"]) expect(refusal({ service_tier })).toContain("SERVICE_TIER_PRICE_MULTIPLIERS");
    expect(refusal({ speed: "fast" })).toContain("SERVICE_TIER_PRICE_MULTIPLIERS");
    expect(refusal({ speed: "ludicrous" })).toContain('speed "ludicrous"');
    expect(refusal({ service_tier: 2 })).toBe("service_tier must be a string");
  });

  test("configured: fast is priority's alias, auto the dearer of auto and priority, speed fast its own key, both together multiply", () => {
    const set = { priority: 2, fast: 6 };
    expect(rate({ service_tier: "priority" }, set)).toBe(2);
    expect(rate({ service_tier: "fast" }, set)).toBe(2);
    expect(rate({ service_tier: "auto" }, set)).toBe(2);
    expect(rate({ service_tier: "auto" }, { auto: 1.5, priority: 2 })).toBe(2);
    expect(rate({ service_tier: "auto" }, { auto: 1.2 })).toBe(1.2);
    expect(rate({ speed: "fast" }, set)).toBe(6);
    expect(rate({ service_tier: "priority", speed: "fast" }, set)).toBe(12);
    expect(refusal({ service_tier: "scale" }, set)).toContain('service_tier "scale"');
  });

  test("in costBounds: every model price and the pin at the tier's rate; the engine's web results are not the provider's", async () => {
    const standard = await boundsOf(hi("x/native-search", { plugins: [{ id: "web", max_results: 1 }] }));
    const priority = await boundsOf(hi("x/native-search", { plugins: [{ id: "web", max_results: 1 }] }), { priceMultiplier: 2 });
    expect(priority.models[0]).toMatchObject({ promptPrice: 2 * 1000, outputPrice: 2 * 2000, fixedNano: 2 * 10_000_000 });
    expect(priority.pin).toEqual({ prompt: 2 * standard.pin.prompt, completion: 2 * standard.pin.completion, request: 0, image: 0 });
    const engine = await boundsOf(hi("x/unlisted-search", { plugins: [{ id: "web", max_results: 1 }] }), { priceMultiplier: 2 });
    expect(engine.models[0]!.fixedNano).toBe(4_000_000);
    // The client's own lower pin still wins.
    const pinned = await boundsOf(hi("x/unlisted-search", { provider: { max_price: { prompt: 1 } } }), {
      priceMultiplier: 2,
      clientPin: { ...NO_PIN, prompt: 1000 },
    });
    expect(pinned.pin.prompt).toBe(1000);
  });
});

describe("no billable request reserves $0", () => {
  test("free models with web results or a request fee, and routers that may pick a paid model, reserve more than 0", async () => {
    const billable = [
      hi("x/llama:free:online"),
      hi("x/llama:free", { plugins: [{ id: "web", max_results: 1 }] }),
      hi("x/fee-free"),
      hi("x/router"),
      hi("x/llama:free", { models: ["x/unlisted-search"] }),
    ];
    for (const body of billable) {
      const plan = planReservation(await boundsOf(body), null, 4096, { kind: "unset" });
      expect(plan.minNano, JSON.stringify(body)).toBeGreaterThan(0);
    }
    // What the upstream bills nothing for reserves nothing: the free model alone, tools and all.
    expect(planReservation(await boundsOf(hi("x/llama:free", { tools })), null, 4096, { kind: "unset" }).desiredNano).toBe(0);
  });
});
