/**
 * Funding through the admin API: the sources an app's users may choose (set, shown, changed,
 * refused by name when wrong), and a connection's source with its linked key shown only by
 * fingerprint, in the operator's views and the app's status answers alike.
 */
import { describe, expect, test } from "bun:test";
import { makeAdminTestApp } from "../helpers/admin";
import { expectError, expectOk } from "../helpers/expect";
import { mintSession } from "../helpers/test-app";
import { pollUntil } from "../helpers/cluster";
import { userKeyFingerprint } from "../../src/store/connections";

const USER_KEY = "sk-or-v1-admin-view-3f1e9b7c2d";

describe("funding sources of an app", () => {
  test("left out: `app` only, and app create's answer keeps its fixed keys; set, they are shown by create, list, show and update", async () => {
    const t = makeAdminTestApp();
    const plain = await expectOk(await t.admin("/apps", { json: { name: "plain" } }), 201);
    expect(plain).not.toHaveProperty("fundingSources");
    expect(await expectOk(await t.admin(`/apps/${plain.appId}`))).toMatchObject({ fundingSources: ["app"] });

    t.clock.advance(1); // listed in creation order
    const both = await expectOk(await t.admin("/apps", { json: { name: "both", fundingSources: ["user", "app", "user"] } }), 201);
    expect(both.fundingSources).toEqual(["app", "user"]);
    expect(await t.deps.store.apps.find(both.appId)).toMatchObject({ fundingSources: ["app", "user"] });
    const listed = await expectOk(await t.admin("/apps"));
    expect(listed.data.map((a: { fundingSources: string[] }) => a.fundingSources)).toEqual([["app"], ["app", "user"]]);

    const updated = await expectOk(await t.admin(`/apps/${plain.appId}`, { method: "PATCH", json: { fundingSources: ["user"] } }));
    expect(updated).toMatchObject({ appId: plain.appId, name: "plain", fundingSources: ["user"] });
    const renamed = await expectOk(await t.admin(`/apps/${plain.appId}`, { method: "PATCH", json: { name: "renamed" } }));
    expect(renamed.fundingSources).toEqual(["user"]);
  });

  test("an empty list, an unknown source or a non-list is 400 naming the field, and changes nothing", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp();
    const cases: Array<[string, string, unknown, RegExp]> = [
      ["POST", "/apps", { name: "x", fundingSources: [] }, /^fundingSources must name at least one of app, user/],
      ["POST", "/apps", { name: "x", fundingSources: ["app", "operator"] }, /^fundingSources: "operator" is not a funding source \(app, user\)/],
      ["POST", "/apps", { name: "x", fundingSources: "app" }, /fundingSources/],
      ["PATCH", `/apps/${a.appId}`, { fundingSources: [] }, /^fundingSources must name at least one/],
      ["PATCH", `/apps/${a.appId}`, { fundingSources: ["USER"] }, /^fundingSources: "USER" is not a funding source/],
    ];
    for (const [method, path, json, message] of cases) await expectError(await t.admin(path, { method, json }), 400, "invalid_request", message);
    expect(await t.deps.store.apps.count()).toBe(1);
    expect((await t.deps.store.apps.find(a.appId))!.fundingSources).toEqual(["app"]);
  });
});

describe("a connection's funding source", () => {
  test("views show the source and the key's fingerprint, never the key; status answers show the source", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp();
    await t.deps.store.connections.approve(a.appId, "ann", 1e9, t.clock.now());
    t.clock.advance(1_000);
    await t.deps.store.connections.approve(a.appId, "payer", 2e9, t.clock.now(), { source: "user", upstreamKey: USER_KEY });

    const answers: string[] = [];
    const read = async (res: Response) => {
      const text = await res.clone().text();
      answers.push(text);
      return expectOk(res);
    };
    const list = await read(await t.admin(`/apps/${a.appId}/connections`));
    expect(list.data.map((c: { appUserId: string; fundingSource: string }) => [c.appUserId, c.fundingSource])).toEqual([
      ["ann", "app"],
      ["payer", "user"],
    ]);
    expect(await read(await t.admin(`/apps/${a.appId}/connections/payer`))).toMatchObject({
      fundingSource: "user",
      fundingStatus: "ok",
      userKey: { fingerprint: userKeyFingerprint(USER_KEY), linkedAt: "2026-01-15T00:00:01.000Z" },
    });
    expect(await read(await t.admin(`/apps/${a.appId}/connections/ann`))).toMatchObject({ fundingSource: "app", userKey: null });
    expect(await read(await t.call("/api/v1/status?appUserId=payer", { bearer: a.secretKey }))).toMatchObject({ connected: true, fundingSource: "user" });
    const session = await mintSession(t, a.secretKey, "payer");
    expect(await read(await t.call("/api/v1/connections", { bearer: session }))).toMatchObject({ fundingSource: "user", fundingStatus: "ok" });
    // A lower cap through the app's own flow keeps the user paying with their key (a higher one takes a new key: funding-refusals.test.ts).
    expect(await read(await t.call("/api/v1/connections", { method: "POST", bearer: session, json: { monthlyUsd: 1.5 } }))).toMatchObject({
      fundingSource: "user",
      limits: { monthlyUsd: 1.5 },
    });
    expect(await t.deps.store.connections.userUpstreamKey(a.appId, "payer")).toBe(USER_KEY);

    await read(await t.admin(`/apps/${a.appId}/connections/payer`, { method: "DELETE" }));
    expect(await t.deps.store.connections.userUpstreamKey(a.appId, "payer")).toBeNull();
    expect(await read(await t.admin(`/apps/${a.appId}/connections/payer`))).toMatchObject({ fundingSource: "app", userKey: null });
    for (const answer of answers) expect(answer).not.toContain(USER_KEY);
    // Every request's line, written once its response is done.
    await pollUntil("the request lines", async () => (t.logger.lines.filter((l) => l.includes('"msg":"request"')).length >= answers.length ? true : undefined));
    expect(t.logger.lines.join("\n")).not.toContain(USER_KEY);
  });
});
