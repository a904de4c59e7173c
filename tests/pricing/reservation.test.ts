import { describe, expect, test } from "bun:test";
import { MIN_COMPLETION_TOKENS, MIN_REASONING_TOKENS, chargeFor, reservationCharge, grantedLimits, planReservation } from "../../src/pricing/reservation";
import type { CostBounds, ModelBound } from "../../src/pricing/worst-case";

/** gpt-4o-mini's rates in nano-dollars per token, a 1000-token prompt bound and no fixed costs. */
const mini: ModelBound = { id: "mini", fixedNano: 0, promptTokens: 1000, promptPrice: 150, outputPrice: 600, reasons: false, modelLimit: 16_384 };
const bounded = (model: Partial<ModelBound>, extra: Partial<CostBounds> = {}): CostBounds => ({
  models: [{ ...mini, ...model }],
  choices: 1,
  predictionTokens: 0,
  pin: { prompt: 150, completion: 600, request: 0, image: 0 },
  ...extra,
});
const plain = bounded({});
const UNSET = { kind: "unset" } as const;

describe("reservation math", () => {
  test("worst case is fixed + prompt bound × input rate + completion limit × output rate", () => {
    const plan = planReservation(bounded({ fixedNano: 2_000 }), 100, 4096, UNSET);
    expect(plan.desiredNano).toBe(2_000 + 150_000 + 60_000);
    expect(plan.minNano).toBe(2_000 + 150_000 + MIN_COMPLETION_TOKENS * 600);
    expect(plan.completionLimit).toBe(100);
    expect(plan.reasoning).toBeNull();
  });

  test("an absent max_tokens reserves the configured default, not the model's whole limit; a larger one is capped by the model", () => {
    expect(planReservation(plain, null, 4096, UNSET).completionLimit).toBe(4096);
    expect(planReservation(plain, 1_000_000, 4096, UNSET).completionLimit).toBe(16_384);
    expect(planReservation(bounded({ modelLimit: 1000 }), null, 4096, UNSET).completionLimit).toBe(1000);
  });

  test("n multiplies every output token", () => {
    const plan = planReservation(bounded({}, { choices: 3 }), 100, 4096, UNSET);
    expect(plan.desiredNano).toBe(150_000 + 3 * 60_000);
  });

  test("with several models, the worst case is the priciest model's, reasoning counted only where a model reasons", () => {
    const reasoner = { ...mini, id: "r", outputPrice: 100, reasons: true };
    const pricey = { ...mini, id: "p", promptPrice: 1000, outputPrice: 6000 };
    const bounds: CostBounds = { ...plain, models: [mini, reasoner, pricey] };
    const plan = planReservation(bounds, 100, 4096, UNSET);
    // pricey: 1,000,000 + 100 × 6000; reasoner: 150,000 + (100 + 1024) × 100: pricey is the worst.
    expect(plan.desiredNano).toBe(1_000_000 + 600_000);
    expect(plan.reasoning?.limit).toBe(MIN_REASONING_TOKENS);
  });

  test("a reasoning model reserves a reasoning budget on top of max_tokens, at least the minimum", () => {
    const bounds = bounded({ reasons: true });
    expect(planReservation(bounds, 100, 4096, UNSET).reasoning).toEqual({ limit: MIN_REASONING_TOKENS, min: MIN_REASONING_TOKENS, sent: true });
    expect(planReservation(bounds, 4000, 4096, UNSET).reasoning?.limit).toBe(4000);
    expect(planReservation(bounds, 4000, 4096, { kind: "effort", effort: "medium" }).reasoning?.limit).toBe(2000);
    expect(planReservation(bounds, 4000, 4096, { kind: "tokens", maxTokens: 3000 }).reasoning?.limit).toBe(3000);
    // Reasoning turned off: not sent, but a margin stays reserved in case the model reasons anyway.
    expect(planReservation(bounds, 4000, 4096, { kind: "off" }).reasoning).toEqual({ limit: 4000, min: 0, sent: false });
    const plan = planReservation(bounds, 4000, 4096, { kind: "tokens", maxTokens: 3000 });
    expect(plan.desiredNano).toBe(150_000 + 7000 * 600);
    expect(plan.minNano).toBe(150_000 + (MIN_COMPLETION_TOKENS + MIN_REASONING_TOKENS) * 600);
  });

  test("the granted limits never cost more than the grant, and shrink completion and reasoning together", () => {
    const bounds = bounded({ reasons: true });
    const plan = planReservation(bounds, 4000, 4096, { kind: "tokens", maxTokens: 4000 });
    expect(grantedLimits(plan, bounds, plan.desiredNano)).toEqual({ maxTokens: 4000, reasoningMaxTokens: 4000, outputTokens: 8000 });
    for (const granted of [plan.minNano, plan.minNano + 599, 1_000_000, 2_345_678, plan.desiredNano - 1]) {
      const limits = grantedLimits(plan, bounds, granted);
      expect(150_000 + Math.ceil(limits.outputTokens * 600)).toBeLessThanOrEqual(granted);
      expect(limits.maxTokens).toBeGreaterThanOrEqual(MIN_COMPLETION_TOKENS);
      expect(limits.reasoningMaxTokens!).toBeGreaterThanOrEqual(MIN_REASONING_TOKENS);
      expect(limits.outputTokens).toBe(limits.maxTokens + limits.reasoningMaxTokens!);
    }
  });

  test("a grant below the full plan clamps max_tokens to what it affords", () => {
    const plan = planReservation(plain, null, 4096, UNSET);
    const granted = 150_000 + 1000 * 600 + 599;
    expect(grantedLimits(plan, plain, granted)).toEqual({ maxTokens: 1000, reasoningMaxTokens: null, outputTokens: 1000 });
  });

  test("fractional rates round the cost up", () => {
    const odd = bounded({ promptTokens: 3, promptPrice: 37.5, outputPrice: 0.2 });
    expect(planReservation(odd, 1, 4096, UNSET).desiredNano).toBe(113 + 1);
    expect(chargeFor(odd, { promptTokens: 1, completionTokens: 1, costUsd: null })!.costNano).toBe(38 + 1);
  });

  test("the upstream's cost wins; else tokens at the worst-case rates plus fixed costs; else nothing: no guess", () => {
    const bounds = bounded({ fixedNano: 1000 });
    expect(chargeFor(bounds, { promptTokens: 10, completionTokens: 5, costUsd: 0.0000123 })).toMatchObject({ costNano: 12_300, source: "upstream" });
    expect(chargeFor(bounds, { promptTokens: 10, completionTokens: 5, costUsd: null })).toMatchObject({
      costNano: 1000 + 1500 + 3000,
      source: "computed",
    });
    expect(chargeFor(bounds, null)).toBeNull();
  });

  test("when nothing can say what a call cost, its whole reservation is charged", () => {
    expect(reservationCharge(20_000)).toEqual({ costNano: 20_000, source: "reservation", promptTokens: 0, completionTokens: 0 });
  });
});
