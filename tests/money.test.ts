import { describe, expect, test } from "bun:test";
import { parsePeriod, periodAt } from "../src/money";

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
