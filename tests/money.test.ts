import { describe, expect, test } from "bun:test";
import { MAX_EXACT_USD, parsePeriod, parseUtcDay, periodAt, usdAmountProblem, usdAmountToNano, type UsdAmountRule } from "../src/money";

describe("periodAt (remembers the last month it computed)", () => {
  const lastMsOfJanuary = Date.UTC(2026, 1, 1) - 1;

  test("a month's bounds, to the millisecond, in any order of asking", () => {
    const asked = [lastMsOfJanuary, lastMsOfJanuary + 1, Date.UTC(2026, 0, 1), Date.UTC(2025, 11, 31, 23, 59, 59, 999), lastMsOfJanuary];
    expect(asked.map((ms) => periodAt(ms).id)).toEqual(["2026-01", "2026-02", "2026-01", "2025-12", "2026-01"]);
    expect(periodAt(lastMsOfJanuary)).toEqual({ id: "2026-01", start: "2026-01-01T00:00:00.000Z", end: "2026-02-01T00:00:00.000Z" });
    expect(periodAt(Date.UTC(2026, 11, 15)).end).toBe("2027-01-01T00:00:00.000Z");
    expect(parsePeriod("2026-02")).toEqual(periodAt(lastMsOfJanuary + 1));
  });

  test("the period it hands out is shared, so it cannot be changed", () => {
    const period = periodAt(Date.UTC(2026, 5, 1));
    expect(periodAt(Date.UTC(2026, 5, 30))).toBe(period);
    expect(Object.isFrozen(period)).toBe(true);
  });
});

describe("usdAmountToNano: a dollar amount from outside becomes whole nano-dollars, or is refused", () => {
  const CAP: UsdAmountRule = { rounding: "floor" };
  const RESERVATION: UsdAmountRule = { rounding: "ceil", zeroAllowed: true };
  const convert = (usd: number, rule: UsdAmountRule) => usdAmountToNano(usd, rule, (problem) => new Error(problem));

  test("caps round down, reservations up; float noise is not a nano-dollar", () => {
    expect([0.1, 1e-9, 1.5e-9, 2.5].map((usd) => convert(usd, CAP))).toEqual([100_000_000, 1, 1, 2_500_000_000]);
    expect([0.1, 1e-9, 1.5e-9, 0].map((usd) => convert(usd, RESERVATION))).toEqual([100_000_000, 1, 2, 0]);
  });

  test("below one nano-dollar is refused whichever way it would round: down it would be 0, up it was never asked for", () => {
    for (const rule of [CAP, RESERVATION]) {
      for (const usd of [1e-10, 9.99e-10, Number.MIN_VALUE]) expect(usdAmountProblem(usd, rule)).toMatch(/^must be at least 0\.000000001 \(one nano-dollar/);
    }
  });

  test("0 only where the rule allows it; negative and non-finite never", () => {
    expect(usdAmountProblem(0, CAP)).toBe("must be a number > 0");
    expect(usdAmountProblem(0, RESERVATION)).toBeNull();
    for (const usd of [-1e-9, -1, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      expect(usdAmountProblem(usd, CAP)).toBe("must be a number > 0");
      expect(usdAmountProblem(usd, RESERVATION)).toBe("must be a number >= 0");
    }
  });

  test("above what nano-dollar counters hold exactly (about $9 million) is refused", () => {
    expect(MAX_EXACT_USD).toBe(9_007_199);
    expect(convert(MAX_EXACT_USD, CAP)).toBe(9_007_199_000_000_000);
    expect(Number.isSafeInteger(convert(MAX_EXACT_USD, RESERVATION))).toBe(true);
    expect(usdAmountProblem(MAX_EXACT_USD + 0.5, CAP)).toMatch(/^must be at most 9007199/);
  });

  test("the refusal is what the caller makes of the problem", () => {
    class FieldError extends Error {}
    expect(() => usdAmountToNano(1e-10, CAP, (problem) => new FieldError(`monthlyUsd ${problem}`))).toThrow(FieldError);
  });
});

describe("parseUtcDay and parsePeriod: only days and months that exist", () => {
  test("a real day is its UTC midnight; 29 February only in a leap year", () => {
    expect(parseUtcDay("2026-01-31")).toBe(Date.UTC(2026, 0, 31));
    expect(parseUtcDay("2026-12-31")).toBe(Date.UTC(2026, 11, 31));
    expect(parseUtcDay("2024-02-29")).toBe(Date.UTC(2024, 1, 29));
    expect(parseUtcDay("2000-02-29")).toBe(Date.UTC(2000, 1, 29));
    // Years below 100 are those years, not 19xx as Date.UTC would read them.
    expect(new Date(parseUtcDay("0099-01-01")!).toISOString()).toBe("0099-01-01T00:00:00.000Z");
  });

  test("impossible days are null, not rolled over into the next month", () => {
    for (const text of ["2026-02-31", "2026-02-29", "1900-02-29", "2026-04-31", "2026-13-01", "2026-00-10", "2026-01-00", "2026-01-32"]) {
      expect({ text, day: parseUtcDay(text) }).toEqual({ text, day: null });
    }
  });

  test("only YYYY-MM-DD", () => {
    for (const text of ["2026-1-01", "2026-01-1", "26-01-01", "2026-01-01T00:00:00Z", " 2026-01-01", "2026/01/01", ""]) {
      expect({ text, day: parseUtcDay(text) }).toEqual({ text, day: null });
    }
  });

  test("a period is a month that exists", () => {
    expect(parsePeriod("2026-12")?.id).toBe("2026-12");
    for (const id of ["2026-00", "2026-13", "2026-1", "2026-01-01", "202601"]) expect({ id, period: parsePeriod(id) }).toEqual({ id, period: null });
  });
});
