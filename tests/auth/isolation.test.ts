/** An app only ever sees its own users: every query is scoped by the credential's app. */
import { describe, expect, test } from "bun:test";
import { makeTestApp, mintSession, type TestApp } from "../helpers/test-app";
import { expectOk } from "../helpers/expect";

const status = async (t: TestApp, secretKey: string, user: string) =>
  expectOk(await t.call(`/api/v1/status?appUserId=${user}`, { bearer: secretKey }));

async function connect(t: TestApp, secretKey: string, user: string, monthlyUsd: number) {
  const token = await mintSession(t, secretKey, user);
  return expectOk(await t.call("/api/v1/connections", { bearer: token, json: { monthlyUsd } }));
}

describe("cross-app isolation", () => {
  test("app A's key cannot read app B's users through /status", async () => {
    const t = makeTestApp();
    const a = t.createClientApp({ name: "A" });
    const b = t.createClientApp({ name: "B" });
    await connect(t, b.secretKey, "bob", 7);
    expect(await status(t, b.secretKey, "bob")).toMatchObject({ connected: true, limits: { monthlyUsd: 7 } });
    expect(await status(t, a.secretKey, "bob")).toMatchObject({ connected: false, limits: { monthlyUsd: 0 }, remainingUsd: 0 });
  });

  test("the same user id in two apps is two users with their own caps", async () => {
    const t = makeTestApp();
    const a = t.createClientApp({ name: "A" });
    const b = t.createClientApp({ name: "B" });
    await connect(t, a.secretKey, "same", 3);
    await connect(t, b.secretKey, "same", 9);
    expect(await status(t, a.secretKey, "same")).toMatchObject({ limits: { monthlyUsd: 3 } });
    expect(await status(t, b.secretKey, "same")).toMatchObject({ limits: { monthlyUsd: 9 } });
  });

  test("app A's token cannot read, change or revoke app B's connection", async () => {
    const t = makeTestApp();
    const a = t.createClientApp({ name: "A" });
    const b = t.createClientApp({ name: "B" });
    await connect(t, b.secretKey, "shared", 9);
    const aToken = await mintSession(t, a.secretKey, "shared", 2);

    // A's token sees A's (empty) namespace only.
    expect(await expectOk(await t.call("/api/v1/connections", { bearer: aToken }))).toMatchObject({ connected: false, limits: { monthlyUsd: 0 } });
    // Approving and revoking with A's token act on A's namespace only.
    await expectOk(await t.call("/api/v1/connections", { bearer: aToken, json: { monthlyUsd: 1 } }));
    expect(await status(t, b.secretKey, "shared")).toMatchObject({ connected: true, limits: { monthlyUsd: 9 } });
    const revoked = await t.call("/api/v1/connections", { method: "DELETE", bearer: aToken });
    expect(revoked.status).toBe(204);
    expect(await status(t, b.secretKey, "shared")).toMatchObject({ connected: true, limits: { monthlyUsd: 9 } });
    expect(await status(t, a.secretKey, "shared")).toMatchObject({ connected: false });
  });

  test("a token only acts on its own user within its app", async () => {
    const t = makeTestApp();
    const a = t.createClientApp();
    await connect(t, a.secretKey, "alice", 5);
    const malloryToken = await mintSession(t, a.secretKey, "mallory", 50);
    await t.call("/api/v1/connections", { method: "DELETE", bearer: malloryToken });
    await expectOk(await t.call("/api/v1/connections", { bearer: malloryToken, json: { monthlyUsd: 50 } }));
    expect(await status(t, a.secretKey, "alice")).toMatchObject({ connected: true, limits: { monthlyUsd: 5 } });
  });
});
