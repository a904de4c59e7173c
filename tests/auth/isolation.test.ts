/** Within one app, a session token acts only on its own user. */
import { describe, expect, test } from "bun:test";
import { makeTestApp, mintSession, type TestApp } from "../helpers/test-app";
import { expectOk } from "../helpers/expect";

const status = async (t: TestApp, secretKey: string, user: string) => expectOk(await t.call(`/api/v1/status?appUserId=${user}`, { bearer: secretKey }));

async function connect(t: TestApp, secretKey: string, user: string, monthlyUsd: number) {
  const token = await mintSession(t, secretKey, user);
  return expectOk(await t.call("/api/v1/connections", { bearer: token, json: { monthlyUsd } }));
}

describe("isolation between users of one app", () => {
  // Across apps, every route: tests/security/cross-app-isolation.test.ts. Within one app:
  test("a token only acts on its own user within its app", async () => {
    const t = makeTestApp();
    const a = await t.createClientApp();
    await connect(t, a.secretKey, "alice", 5);
    const malloryToken = await mintSession(t, a.secretKey, "mallory", 50);
    await t.call("/api/v1/connections", { method: "DELETE", bearer: malloryToken });
    await expectOk(await t.call("/api/v1/connections", { bearer: malloryToken, json: { monthlyUsd: 50 } }));
    expect(await status(t, a.secretKey, "alice")).toMatchObject({ connected: true, limits: { monthlyUsd: 5 } });
  });
});
