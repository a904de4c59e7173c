import { describe, expect, test } from "bun:test";
import { makeTestApp, mintSession, type TestApp } from "../helpers/test-app";
import { expectError, expectOk } from "../helpers/expect";
import { userAccount } from "../../src/budget/accounts";
import { periodAt } from "../../src/money";

const statusPath = (user: string) => `/api/v1/status?appUserId=${encodeURIComponent(user)}`;

/** Spends through the live budget ledger (reserve, then settle), as a metered request does. */
async function recordSpend(t: TestApp, appId: string, user: string, atMs: number, nano: number): Promise<void> {
  const requestId = crypto.randomUUID();
  const reserved = await t.deps.budget.reserve(userAccount(appId, periodAt(atMs).id, user), requestId, Number.MAX_SAFE_INTEGER, 0, nano);
  expect(reserved.ok).toBe(true);
  await t.deps.budget.settle(requestId, nano);
}

/** Settled spend as the durable per-account totals hold it; the ledger loads it on first use. */
function storedSpend(t: TestApp, appId: string, user: string, atMs: number, nano: number): void {
  t.db.query("INSERT INTO usage_totals (account, spent_nano, request_count) VALUES (?, ?, 1)").run(userAccount(appId, periodAt(atMs).id, user), nano);
}

async function connect(t: TestApp, secretKey: string, user: string, monthlyUsd: number): Promise<void> {
  const token = await mintSession(t, secretKey, user);
  await expectOk(await t.call("/api/v1/connections", { bearer: token, json: { monthlyUsd } }));
}

describe("GET /api/v1/status", () => {
  test("a never-connected user: connected false, limit 0, usage 0, remaining 0, exactly these fields", async () => {
    const t = makeTestApp();
    const a = await t.createClientApp();
    const body = await expectOk(await t.call(statusPath("ghost"), { bearer: a.secretKey }));
    expect(body).toEqual({
      connected: false,
      limits: { monthlyUsd: 0 },
      usage: { monthlyUsd: 0 },
      remainingUsd: 0,
      period: { start: "2026-01-01T00:00:00.000Z", end: "2026-02-01T00:00:00.000Z" },
      resetsAt: "2026-02-01T00:00:00.000Z",
      fundingSource: "app",
      upstreamCredit: null,
    });
  });

  test("a connected user with settled spend and an in-flight reservation", async () => {
    const t = makeTestApp();
    const a = await t.createClientApp();
    await connect(t, a.secretKey, "u", 10);
    await recordSpend(t, a.appId, "u", t.clock.now(), 2_500_000_000); // $2.50
    await t.deps.budget.reserve(userAccount(a.appId, periodAt(t.clock.now()).id, "u"), "req-1", 10e9, 1, 1_000_000_000);
    const body = await expectOk(await t.call(statusPath("u"), { bearer: a.secretKey }));
    expect(body).toMatchObject({ connected: true, limits: { monthlyUsd: 10 }, usage: { monthlyUsd: 2.5 }, remainingUsd: 6.5 });
  });

  test("not connected: usage (as stored) is still shown, remaining is 0", async () => {
    const t = makeTestApp();
    const a = await t.createClientApp();
    storedSpend(t, a.appId, "u", t.clock.now(), 1_250_000_000);
    const body = await expectOk(await t.call(statusPath("u"), { bearer: a.secretKey }));
    expect(body).toMatchObject({ connected: false, limits: { monthlyUsd: 0 }, usage: { monthlyUsd: 1.25 }, remainingUsd: 0 });
  });

  test("remaining never goes below 0 when spend exceeds a lowered cap", async () => {
    const t = makeTestApp();
    const a = await t.createClientApp();
    await connect(t, a.secretKey, "u", 1);
    await recordSpend(t, a.appId, "u", t.clock.now(), 3_000_000_000);
    expect(await expectOk(await t.call(statusPath("u"), { bearer: a.secretKey }))).toMatchObject({ usage: { monthlyUsd: 3 }, remainingUsd: 0 });
  });

  test("period and resetsAt follow the UTC calendar month across a rollover (ManualClock)", async () => {
    const t = makeTestApp({ now: Date.UTC(2026, 0, 31, 23, 59, 59) });
    const a = await t.createClientApp();
    await connect(t, a.secretKey, "u", 10);
    await recordSpend(t, a.appId, "u", t.clock.now(), 4_000_000_000);

    const january = await expectOk(await t.call(statusPath("u"), { bearer: a.secretKey }));
    expect(january).toMatchObject({
      period: { start: "2026-01-01T00:00:00.000Z", end: "2026-02-01T00:00:00.000Z" },
      resetsAt: "2026-02-01T00:00:00.000Z",
      usage: { monthlyUsd: 4 },
      remainingUsd: 6,
    });

    t.clock.advance(1_000); // 2026-02-01T00:00:00Z: a new period, usage starts again
    const february = await expectOk(await t.call(statusPath("u"), { bearer: a.secretKey }));
    expect(february).toMatchObject({
      connected: true,
      period: { start: "2026-02-01T00:00:00.000Z", end: "2026-03-01T00:00:00.000Z" },
      resetsAt: "2026-03-01T00:00:00.000Z",
      usage: { monthlyUsd: 0 },
      remainingUsd: 10,
    });
  });

  test("December rolls over into January of the next year", async () => {
    const t = makeTestApp({ now: Date.UTC(2026, 11, 31, 12) });
    const a = await t.createClientApp();
    const body = await expectOk(await t.call(statusPath("u"), { bearer: a.secretKey }));
    expect(body.period).toEqual({ start: "2026-12-01T00:00:00.000Z", end: "2027-01-01T00:00:00.000Z" });
    expect(body.resetsAt).toBe("2027-01-01T00:00:00.000Z");
  });

  test("a leap-year February ends on 1 March", async () => {
    const t = makeTestApp({ now: Date.UTC(2028, 1, 29, 23, 59, 59, 999) });
    const a = await t.createClientApp();
    const body = await expectOk(await t.call(statusPath("u"), { bearer: a.secretKey }));
    expect(body.period).toEqual({ start: "2028-02-01T00:00:00.000Z", end: "2028-03-01T00:00:00.000Z" });
  });

  test("a user id with URL-special characters round-trips", async () => {
    const t = makeTestApp();
    const a = await t.createClientApp();
    const user = "a/b?c=d&e#f é";
    await connect(t, a.secretKey, user, 2);
    expect(await expectOk(await t.call(statusPath(user), { bearer: a.secretKey }))).toMatchObject({ connected: true, limits: { monthlyUsd: 2 } });
    expect(await expectOk(await t.call(statusPath("a/b"), { bearer: a.secretKey }))).toMatchObject({ connected: false });
  });

  describe("400 invalid_request naming query.appUserId", () => {
    for (const [name, path] of [
      ["missing", "/api/v1/status"],
      ["empty", "/api/v1/status?appUserId="],
      ["longer than 256", `/api/v1/status?appUserId=${"x".repeat(257)}`],
    ] as const) {
      test(name, async () => {
        const t = makeTestApp();
        const a = await t.createClientApp();
        await expectError(await t.call(path, { bearer: a.secretKey }), 400, "invalid_request", /^query\.appUserId/);
      });
    }
  });

  test("401 auth without a secret key", async () => {
    const t = makeTestApp();
    await expectError(await t.call(statusPath("u")), 401, "auth");
  });
});
