/**
 * Every date the service takes is a day or month that exists (src/money.ts parseUtcDay):
 * JavaScript's Date rolls 2026-02-31 over to 3 March, which would export a range no one
 * asked for. Refused with 400 naming the field. The CLI's --from/--to are in
 * tests/e2e/cli.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { expectError, expectOk } from "../helpers/expect";
import { makeAdminTestApp } from "../helpers/admin";

const IMPOSSIBLE_DAYS = ["2026-02-31", "2026-02-29", "2026-13-01", "2026-00-10", "2026-01-00", "2026-04-31"];

describe("the admin usage export's from and to", () => {
  test("an impossible day is 400 naming the field", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp();
    const exportOf = (from: string, to: string) => t.admin(`/apps/${a.appId}/usage?${new URLSearchParams({ from, to })}`);
    for (const day of IMPOSSIBLE_DAYS) {
      await expectError(await exportOf(day, "2026-12-31"), 400, "invalid_request", /^from must be a date like 2026-11-01/);
      await expectError(await exportOf("2026-01-01", day), 400, "invalid_request", /^to must be a date like 2026-11-01/);
    }
    // The last day of a month, and 29 February of a leap year, are days.
    expect((await exportOf("2024-02-29", "2026-02-28")).status).toBe(200);
  });
});

describe("GET /usage's period", () => {
  test("a month that does not exist is 400 naming query.period", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp();
    const usage = (period: string) => t.call(`/api/v1/usage?${new URLSearchParams({ appUserId: "u", period })}`, { bearer: a.secretKey });
    for (const period of ["2026-13", "2026-00", "2026-02-31"]) await expectError(await usage(period), 400, "invalid_request", /^query\.period must be YYYY-MM/);
    await expectOk(await usage("2026-12"));
  });
});
