/**
 * The funding flow refused: by the upstream's code exchange (a used code, a verifier that does
 * not match), by the app's funding sources, and the demo upstream's page outside demo mode.
 */
import { describe, expect, test } from "bun:test";
import { usdToNanoFloor } from "../../src/money";
import { UpstreamUnreachable } from "../../src/upstream/client";
import { makeTestApp } from "../helpers/test-app";
import { formFields, pageCookie, pkcePair } from "../upstream/pkce-helpers";
import { callback, decide, fundingApp, json, linkedKey, openSqlite, PUBLIC_URL, start } from "../helpers/funding-flow";

describe("the code exchange refused by the upstream", () => {
  test("a code used before (the mock: 400) and a verifier that does not match the challenge (the mock: 403): 400 page, connection unchanged", async () => {
    const t = await fundingApp(openSqlite);
    try {
      const first = await start(t, await t.session("fay"));
      const back = await decide(t, first.authorizeUrl, "approve");
      expect((await callback(t, back, first.cookie)).status).toBe(200);
      const key = await linkedKey(t, "fay");

      // A second flow, its callback carrying the first flow's code: the upstream has burned it.
      const second = await start(t, await t.session("fay"), { monthlyUsd: 2 });
      const secondBack = await decide(t, second.authorizeUrl, "approve");
      secondBack.searchParams.set("code", back.searchParams.get("code")!);
      let result = await callback(t, secondBack, second.cookie);
      expect({ status: result.status, outcome: result.data.outcome }).toEqual({ status: 400, outcome: "failed" });
      expect(result.data.message).toContain("The upstream did not accept this approval (HTTP 400)");

      // The page asked with another challenge than the service's: its verifier does not match.
      const third = await start(t, await t.session("fay"), { monthlyUsd: 2 });
      third.authorizeUrl.searchParams.set("code_challenge", pkcePair().challenge);
      result = await callback(t, await decide(t, third.authorizeUrl, "approve"), third.cookie);
      expect({ status: result.status, message: result.data.message }).toEqual({ status: 400, message: expect.stringContaining("(HTTP 403)") });

      expect(await linkedKey(t, "fay")).toBe(key);
      expect((await t.deps.store.connections.findActive(t.appId, "fay"))!.monthlyCapNano).toBe(usdToNanoFloor(5));
      expect(t.logs.filter((line) => line.includes("funding link refused by the upstream")).length).toBe(2);
    } finally {
      await t.close();
    }
  });
});

describe("the upstream unreachable at the exchange", () => {
  test("a 502 page, nothing linked, and the flow spent: the user starts again", async () => {
    const t = await fundingApp(openSqlite);
    try {
      const flow = await start(t, await t.session("ian"));
      const back = await decide(t, flow.authorizeUrl, "approve");
      const exchange = t.upstream.exchangeAuthCode.bind(t.upstream);
      t.upstream.exchangeAuthCode = async () => {
        throw new UpstreamUnreachable("could not reach the upstream: connection refused");
      };
      const result = await callback(t, back, flow.cookie);
      expect({ status: result.status, outcome: result.data.outcome }).toEqual({ status: 502, outcome: "failed" });
      expect(await t.deps.store.connections.findActive(t.appId, "ian")).toBeNull();
      t.upstream.exchangeAuthCode = exchange;
      expect((await callback(t, back, flow.cookie)).status).toBe(400);
    } finally {
      await t.close();
    }
  });
});

describe("an app's funding sources", () => {
  test("without `user`: the start is refused (400), no flow and no cookie", async () => {
    const t = await fundingApp(openSqlite, ["app"]);
    try {
      const res = await t.call("/api/v1/connections/funding", {
        method: "POST",
        headers: { authorization: `Bearer ${await t.session("gus")}`, "content-type": "application/json" },
        body: JSON.stringify({ monthlyUsd: 5 }),
      });
      expect(res.status).toBe(400);
      expect(res.headers.get("set-cookie")).toBeNull();
      expect((await json(res)).error).toMatchObject({
        code: "invalid_request",
        message: expect.stringContaining("may not pay with their own upstream account"),
      });
    } finally {
      await t.close();
    }
  });

  test("without `app`: POST /connections refuses a connection the operator would pay for, but changes the cap of one the user pays for", async () => {
    const t = await fundingApp(openSqlite, ["user"]);
    try {
      const token = await t.session("hal");
      const approve = (monthlyUsd: number) =>
        t.call("/api/v1/connections", {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ monthlyUsd }),
        });
      const refused = await approve(5);
      expect(refused.status).toBe(400);
      expect((await json(refused)).error.message).toContain("link one with POST /connections/funding");
      expect(await t.deps.store.connections.findActive(t.appId, "hal")).toBeNull();

      const flow = await start(t, token, { monthlyUsd: 5 });
      expect((await callback(t, await decide(t, flow.authorizeUrl, "approve"), flow.cookie)).status).toBe(200);
      const lowered = await approve(2);
      expect({ status: lowered.status, body: await json(lowered) }).toMatchObject({ status: 200, body: { fundingSource: "user", limits: { monthlyUsd: 2 } } });
    } finally {
      await t.close();
    }
  });
});

describe("the cap of a connection the user pays for", () => {
  test("raised on POST /connections: 400 saying to link again, the cap as it was; the link flow with the new cap raises it on a new key", async () => {
    const t = await fundingApp(openSqlite);
    try {
      const token = await t.session("kim");
      const approve = (monthlyUsd: number) =>
        t.call("/api/v1/connections", {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ monthlyUsd }),
        });
      const flow = await start(t, token, { monthlyUsd: 5 });
      expect((await callback(t, await decide(t, flow.authorizeUrl, "approve"), flow.cookie)).status).toBe(200);
      const firstKey = (await linkedKey(t, "kim"))!;

      // The key was made with $5 as its monthly limit: a $8 cap without a new key would admit what the upstream refuses.
      const raised = await approve(8);
      expect(raised.status).toBe(400);
      const { error } = await json(raised);
      expect(error.code).toBe("invalid_request");
      expect(error.message).toMatch(/^monthlyUsd: .*link the account again with the new cap \(POST \/connections\/funding/);
      expect((await t.deps.store.connections.findActive(t.appId, "kim"))!.monthlyCapNano).toBe(usdToNanoFloor(5));
      // The same cap, or a lower one, needs no new key.
      expect((await approve(5)).status).toBe(200);
      expect((await approve(3)).status).toBe(200);

      // Linking again with the new cap: a new key, made with that limit, and the cap raised.
      const again = await start(t, token, { monthlyUsd: 8 });
      expect((await callback(t, await decide(t, again.authorizeUrl, "approve"), again.cookie)).status).toBe(200);
      const secondKey = (await linkedKey(t, "kim"))!;
      expect(secondKey).not.toBe(firstKey);
      expect(t.upstream.mock.keys.get(secondKey)).toMatchObject({ limitUsd: 8 });
      expect((await t.deps.store.connections.findActive(t.appId, "kim"))!).toMatchObject({ fundingSource: "user", monthlyCapNano: usdToNanoFloor(8) });
    } finally {
      await t.close();
    }
  });
});

describe("the demo upstream's page", () => {
  test("sends browsers back only to the service's own origin: another callback is a 400 page, never a redirect", async () => {
    const t = await fundingApp(openSqlite);
    try {
      const flow = await start(t, await t.session("liv"));
      for (const callback of ["https://evil.example/cb", "http://localhost:9999/cb", "http://127.0.0.1:8787/cb"]) {
        const url = new URL(flow.authorizeUrl);
        url.searchParams.set("callback_url", callback);
        const page = await t.call(url.toString());
        expect(page.status).toBe(400);
        expect(await page.text()).toContain(`callback_url must be on ${PUBLIC_URL}`);
        const form = new URLSearchParams({ ...Object.fromEntries(url.searchParams), decision: "approve" });
        const posted = await t.call(url.toString(), {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: form.toString(),
        });
        expect({ status: posted.status, location: posted.headers.get("location") }).toEqual({ status: 400, location: null });
      }
      // The service's own callback is served as before.
      expect((await t.call(flow.authorizeUrl.toString())).status).toBe(200);
    } finally {
      await t.close();
    }
  });

  test("checks its form's own CSRF token: a form posted from elsewhere (no cookie, or another page's) is a 403 page, nothing linked", async () => {
    const t = await fundingApp(openSqlite);
    try {
      const flow = await start(t, await t.session("max"));
      const page = await t.call(flow.authorizeUrl.toString());
      const fields = formFields(await page.text());
      const other = await t.call(flow.authorizeUrl.toString());
      for (const cookie of ["", pageCookie(other)]) {
        const posted = await t.call(flow.authorizeUrl.toString(), {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", ...(cookie && { cookie }) },
          body: new URLSearchParams({ ...fields, decision: "approve" }).toString(),
        });
        expect({ status: posted.status, location: posted.headers.get("location") }).toEqual({ status: 403, location: null });
      }
      expect(await linkedKey(t, "max")).toBeNull();
      // The browser shown the page: its redirect to the callback, and the link.
      const result = await callback(t, await decide(t, flow.authorizeUrl, "approve"), flow.cookie);
      expect(result.status).toBe(200);
      expect(await linkedKey(t, "max")).not.toBeNull();
    } finally {
      await t.close();
    }
  });

  test("is served in demo mode only: with an upstream key, /demo-upstream/auth is no route", async () => {
    const query = `?callback_url=${encodeURIComponent(`${PUBLIC_URL}/cb`)}`;
    const demo = makeTestApp();
    expect((await demo.call(`/demo-upstream/auth${query}`)).status).toBe(200);
    const real = makeTestApp({ env: { UPSTREAM_API_KEY: "sk-or-operator" } });
    expect((await real.call(`/demo-upstream/auth${query}`)).status).toBe(404);
  });
});
