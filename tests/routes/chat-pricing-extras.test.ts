/**
 * Through the route: service tiers and fast mode refused unless priced, and when priced
 * reserved and pinned at the tier's rate; web results from the upstream's engine reserved
 * at WEB_SEARCH_RESULT_USD. The cap suites for the same dimensions: tests/metering/hard-cap-beyond-listing.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { BILLING_MODELS, DEFAULT_MODELS } from "../../packages/mock-upstream/src";
import { chatTestApp } from "../helpers/chat-app";

const json = async (r: Response): Promise<any> => r.json();
const models = () => [...DEFAULT_MODELS, ...BILLING_MODELS].map((m) => ({ ...m, pricing: { ...m.pricing } }));
const app = (env: Record<string, string> = {}) => chatTestApp({ mock: { models: models() }, env });
const hi = (extra: Record<string, unknown> = {}) => ({ model: "openai/gpt-4o-mini", max_tokens: 16, messages: [{ role: "user", content: "hi" }], ...extra });
const reservedUsd = (res: Response) => Number(res.headers.get("x-metering-reserved-usd"));

describe("service tiers and fast mode", () => {
  test("unpriced, a premium tier or speed fast is 400 invalid_request naming the setting; nothing reserved, nothing sent", async () => {
    const t = await app();
    await t.connect("alice", 5);
    for (const extra of [{ service_tier: "priority" }, { service_tier: "fast" }, { service_tier: "scale" }, { service_tier: "auto" }, { speed: "fast" }]) {
      const res = await t.chat(hi(extra));
      expect(res.status, JSON.stringify(extra)).toBe(400);
      const { error } = await json(res);
      expect(error.code).toBe("invalid_request");
      expect(error.message).toContain("SERVICE_TIER_PRICE_MULTIPLIERS");
    }
    expect(t.mock.served).toHaveLength(0);
    const status = await json(await t.get("/api/v1/status?appUserId=alice"));
    expect(status.remainingUsd).toBe(5);
  });

  test("default, flex, null and absent pass at the listed prices, and the tier goes upstream as sent", async () => {
    const t = await app();
    await t.connect("alice", 5);
    const plain = reservedUsd(await t.chat(hi({ service_tier: null })));
    for (const service_tier of ["default", "flex"]) {
      const res = await t.chat(hi({ service_tier }));
      expect(res.status).toBe(200);
      expect(t.mock.served.at(-1)!.body).toMatchObject({ service_tier });
      expect(t.mock.served.at(-1)!.body).toMatchObject({ provider: { max_price: { prompt: "0.15", completion: "0.6" } } });
      // Only the body's few extra bytes (the field itself) reserve more.
      expect(reservedUsd(res)).toBeCloseTo(plain, 5);
    }
  });

  test("priced, the reservation and provider.max_price are at the tier's rate, so the upstream serves it within the reservation", async () => {
    const t = await app({ SERVICE_TIER_PRICE_MULTIPLIERS: "priority=2,fast=6" });
    await t.connect("alice", 5);
    const plain = await t.chat(hi({ service_tier: "flex" }));
    const priority = await t.chat(hi({ service_tier: "priority" }));
    expect(priority.status).toBe(200);
    expect(t.mock.served.at(-1)!.body).toMatchObject({ service_tier: "priority", provider: { max_price: { prompt: "0.3", completion: "1.2" } } });
    expect(reservedUsd(priority)).toBeGreaterThan(1.9 * reservedUsd(plain));
    expect(t.mock.served.at(-1)!.costUsd).toBeLessThanOrEqual(reservedUsd(priority));
    const fast = await t.chat(hi({ speed: "fast" }));
    expect(t.mock.served.at(-1)!.body).toMatchObject({ provider: { max_price: { prompt: "0.9", completion: "3.6" } } });
    expect(reservedUsd(fast)).toBeGreaterThan(5.5 * reservedUsd(plain));
    expect((await t.chat(hi({ service_tier: "scale" }))).status).toBe(400);
  });
});

describe("web results from the upstream's engine", () => {
  test("a :free:online call reserves its results at $0.004, or at WEB_SEARCH_RESULT_USD", async () => {
    const body = { model: "bill/llama:free:online", max_tokens: 16, messages: [{ role: "user", content: "news" }] };
    const byDefault = await app();
    await byDefault.connect("alice", 5);
    expect(reservedUsd(await byDefault.chat(body))).toBe(0.02);
    const dearer = await app({ WEB_SEARCH_RESULT_USD: "0.01" });
    await dearer.connect("alice", 5);
    expect(reservedUsd(await dearer.chat(body))).toBe(0.05);
  });
});
