import { describe, expect, test } from "bun:test";
import { MIN_COMPLETION_TOKENS, affordableMaxTokens, chargeFor, estimateCharge, planReservation } from "../../src/metering/reservation";
import type { ModelPrice } from "../../src/metering/pricing";

const price: ModelPrice = { promptNanoPerToken: 150, completionNanoPerToken: 600, contextLength: 128_000, maxCompletionTokens: 16_384, listed: true };

describe("reservation math", () => {
  test("worst case is prompt bound × prompt price + completion limit × completion price", () => {
    const plan = planReservation(price, 1000, 100);
    expect(plan.promptCostNano).toBe(150_000);
    expect(plan.desiredNano).toBe(150_000 + 60_000);
    expect(plan.minNano).toBe(150_000 + MIN_COMPLETION_TOKENS * 600);
    expect(plan.completionLimit).toBe(100);
  });

  test("an absent max_tokens becomes the model's completion limit, a larger one is capped by it", () => {
    expect(planReservation(price, 10, null).completionLimit).toBe(16_384);
    expect(planReservation(price, 10, 1_000_000).completionLimit).toBe(16_384);
  });

  test("max_tokens is clamped to what the grant affords, never above it", () => {
    const plan = planReservation(price, 1000, null);
    const granted = 150_000 + 600 * 250 + 599; // room for 250 tokens, not 251
    const tokens = affordableMaxTokens(plan, price, granted);
    expect(tokens).toBe(250);
    expect(plan.promptCostNano + tokens * price.completionNanoPerToken).toBeLessThanOrEqual(granted);
  });

  test("fractional prices round the cost up", () => {
    const odd: ModelPrice = { ...price, promptNanoPerToken: 37.5, completionNanoPerToken: 0.1 };
    expect(planReservation(odd, 3, 1).promptCostNano).toBe(113);
    expect(chargeFor(odd, { promptTokens: 1, completionTokens: 1, costUsd: null }, () => { throw new Error("unused"); }).costNano).toBe(38 + 1);
  });

  test("charge prefers usage.cost, then tokens × price, then the estimate", () => {
    const estimate = () => estimateCharge(planReservation(price, 100, 50), price, 100, 5, 10_000_000);
    expect(chargeFor(price, { promptTokens: 10, completionTokens: 5, costUsd: 0.0000123 }, estimate)).toMatchObject({ costNano: 12_300, source: "upstream" });
    expect(chargeFor(price, { promptTokens: 10, completionTokens: 5, costUsd: null }, estimate)).toMatchObject({ costNano: 1500 + 3000, source: "computed" });
    expect(chargeFor(price, null, estimate)).toMatchObject({ costNano: 15_000 + 3000, source: "estimated" });
  });

  test("the estimate never exceeds the reservation", () => {
    const plan = planReservation(price, 100, 50);
    expect(estimateCharge(plan, price, 100, 10_000, 20_000).costNano).toBe(20_000);
  });
});
