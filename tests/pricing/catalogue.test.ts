/**
 * The price list's own life (src/pricing/catalogue.ts): when it counts as fresh, and its
 * refresh beat. What a missing or stale listing does to a call is tested through the app in
 * tests/routes/chat-pricing-no-listing.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { memoryLogger } from "../../src/logger";
import { PricingCatalogue, STALE_AFTER_INTERVALS, type ListModels } from "../../src/pricing/catalogue";
import { FakeTimers } from "../helpers/fake-timers";

const FALLBACK = { promptUsdPerToken: 1e-5, completionUsdPerToken: 1e-5, contextTokens: 1000 };
const LISTING = [{ id: "a/model", context_length: 1000, pricing: { prompt: "0.000001", completion: "0.000002" } }];

function catalogueOn(listModels: ListModels, timers = new FakeTimers()) {
  const logger = memoryLogger();
  return { catalogue: new PricingCatalogue(listModels, FALLBACK, logger, timers), timers, logs: logger.lines };
}

describe("PricingCatalogue", () => {
  test("a load that never ends leaves the listing stale once it is three refresh intervals old", async () => {
    let hang = false;
    const { catalogue, timers } = catalogueOn(() => (hang ? new Promise<unknown[]>(() => {}) : Promise.resolve(LISTING)));
    await catalogue.refresh();
    catalogue.start(60);
    try {
      expect(catalogue.fresh).toBe(true);
      hang = true;
      timers.advance(STALE_AFTER_INTERVALS * 60_000);
      // The beat's load is still under way, and the listing is exactly three intervals old.
      expect(catalogue.ageMs).toBe(STALE_AFTER_INTERVALS * 60_000);
      expect(catalogue.fresh).toBe(true);
      timers.advance(1);
      expect(catalogue.fresh).toBe(false);
      expect(catalogue.size).toBe(1);
    } finally {
      catalogue.stop();
    }
  });

  test("a refresh asked for while a load is under way joins it; an outage is logged at warn once", async () => {
    let calls = 0;
    let fail = true;
    const { catalogue, logs } = catalogueOn(async () => {
      calls++;
      if (fail) throw new Error("GET /models answered 503");
      return LISTING;
    });
    await Promise.all([catalogue.refresh(), catalogue.refresh()]);
    expect(calls).toBe(1);
    await catalogue.refresh();
    expect(calls).toBe(2);
    expect(logs.filter((line) => line.includes('"warn"') && line.includes("refresh failed"))).toHaveLength(1);
    expect(catalogue.fresh).toBe(false);
    fail = false;
    await catalogue.refresh();
    expect(catalogue.fresh).toBe(true);
  });
});
