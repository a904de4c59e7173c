/**
 * Linking a user's own upstream account (issue 34): POST /connections/funding starts the PKCE
 * flow, the demo upstream's page (mounted on the service's origin in demo mode) approves or
 * denies, and GET /connect/funding/callback takes the flow once, exchanges the code and links
 * the key. On both store engines, with the in-process mock as the upstream.
 */
import { describe, expect, test } from "bun:test";
import { FUNDING_FLOW_LIFETIME_MS } from "../../src/services/funding-link";
import { userKeyFingerprint } from "../../src/store/connections";
import { usdToNanoFloor } from "../../src/money";
import { storeEngines } from "../helpers/store-engines";
import { callback, CALLBACK, decide, fundingApp, linkedKey, PUBLIC_URL, start } from "../helpers/funding-flow";

describe.each(storeEngines())("the funding flow on %s", (_engine, open) => {
  test("start, Approve on the demo upstream's page, callback: the connection is paid by the user's key, sealed, shown by fingerprint", async () => {
    const t = await fundingApp(open);
    try {
      await t.deps.store.webhooks.createEndpoint(t.appId, "https://hooks.example/proxy", null, t.clock.now());
      const token = await t.session("ann");
      const { authorizeUrl, cookie } = await start(t, token, { monthlyUsd: 5 });
      // The page is the demo upstream's, on the service's own origin; the callback is PUBLIC_URL's.
      expect(`${authorizeUrl.origin}${authorizeUrl.pathname}`).toBe(`${PUBLIC_URL}/demo-upstream/auth`);
      const params = Object.fromEntries(authorizeUrl.searchParams);
      expect(params).toMatchObject({ code_challenge_method: "S256", limit: "5", usage_limit_type: "monthly" });
      expect(params.code_challenge).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(params.callback_url).toMatch(new RegExp(`^${CALLBACK}\\?state=fs_[A-Za-z0-9]{40}$`));

      const back = await decide(t, authorizeUrl, "approve");
      expect(back.searchParams.get("code")).toBeTruthy();
      const result = await callback(t, back, cookie);
      const key = (await linkedKey(t, "ann"))!;
      expect(key).toMatch(/^sk-or-v1-[0-9a-f]{64}$/);
      expect(result.status).toBe(200);
      expect(result.data).toEqual({
        outcome: "connected",
        appId: t.appId,
        monthlyUsd: 5,
        resetsAt: expect.any(String),
        fundingSource: "user",
        keyFingerprint: userKeyFingerprint(key),
      });
      expect(result.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
      expect(result.headers.get("cache-control")).toBe("no-store");
      expect(result.headers.get("set-cookie")).toStartWith("mp_funding_session=; Max-Age=0;");

      const connection = (await t.deps.store.connections.findActive(t.appId, "ann"))!;
      expect(connection).toMatchObject({ fundingSource: "user", fundingStatus: "ok", monthlyCapNano: usdToNanoFloor(5) });
      expect(connection.userKey!.fingerprint).toBe(userKeyFingerprint(key));
      // The upstream holds the cap a second time: the key's own monthly credit limit.
      expect(t.upstream.mock.keys.get(key)).toMatchObject({ limitUsd: 5, usageLimitType: "monthly" });
      // The approval's webhook event, as POST /connections records it.
      expect((await t.deps.store.webhooks.listDeliveries(t.appId, 10)).map((d) => d.type)).toEqual(["connection.approved"]);
      // The session's status shows the source, never the key; no log line, page or answer carries it.
      const status = await t.call("/api/v1/connections", { headers: { authorization: `Bearer ${token}` } });
      const statusText = await status.text();
      expect(JSON.parse(statusText)).toMatchObject({ connected: true, fundingSource: "user" });
      for (const text of [statusText, result.html, ...t.logs]) expect(text).not.toContain(key);
      expect(t.logs.some((line) => line.includes("funding linked") && line.includes(userKeyFingerprint(key)))).toBe(true);
    } finally {
      await t.close();
    }
  });

  test("a tampered state, a reused state, a state without its cookie or from another session, an expired flow: 400 page, nothing linked", async () => {
    const t = await fundingApp(open);
    try {
      const token = await t.session("bob");
      // Tampered: another state finds no flow, and leaves the real one alone.
      const first = await start(t, token);
      const back = await decide(t, first.authorizeUrl, "approve");
      const tampered = new URL(back);
      const state = tampered.searchParams.get("state")!;
      tampered.searchParams.set("state", state.slice(0, -1) + (state.endsWith("A") ? "B" : "A"));
      let result = await callback(t, tampered, first.cookie);
      expect({ status: result.status, outcome: result.data.outcome }).toEqual({ status: 400, outcome: "failed" });
      expect(result.data.message).toContain("expired, was already used, or was started in another browser session");
      expect(await linkedKey(t, "bob")).toBeNull();
      // The genuine callback still works, once; reused, it finds nothing and changes nothing.
      expect((await callback(t, back, first.cookie)).status).toBe(200);
      const linked = await linkedKey(t, "bob");
      expect(linked).not.toBeNull();
      result = await callback(t, back, first.cookie);
      expect({ status: result.status, outcome: result.data.outcome }).toEqual({ status: 400, outcome: "failed" });
      expect(await linkedKey(t, "bob")).toBe(linked);

      // Another session's cookie (or none): refused, and the flow is spent (its owner cannot finish it either).
      for (const sent of ["another session's", "none"]) {
        const flow = await start(t, await t.session("cyd"));
        const landing = await decide(t, flow.authorizeUrl, "approve");
        const other = await start(t, await t.session("cyd"));
        expect(other.cookie).not.toBe(flow.cookie);
        expect({ sent, status: (await callback(t, landing, sent === "none" ? null : other.cookie)).status }).toEqual({ sent, status: 400 });
        expect((await callback(t, landing, flow.cookie)).status).toBe(400);
        expect(await t.deps.store.connections.findActive(t.appId, "cyd")).toBeNull();
      }

      // Expired: ten minutes after the start.
      const late = await start(t, await t.session("dan"));
      const lateBack = await decide(t, late.authorizeUrl, "approve");
      t.clock.advance(FUNDING_FLOW_LIFETIME_MS);
      expect((await callback(t, lateBack, late.cookie)).status).toBe(400);
      expect(await t.deps.store.connections.findActive(t.appId, "dan")).toBeNull();
    } finally {
      await t.close();
    }
  });

  test("Deny on the upstream's page: the flow is spent, the connection as it was", async () => {
    const t = await fundingApp(open);
    try {
      await t.deps.store.connections.approve(t.appId, "eve", usdToNanoFloor(3), t.clock.now());
      const flow = await start(t, await t.session("eve"), { monthlyUsd: 7 });
      const back = await decide(t, flow.authorizeUrl, "deny");
      expect(back.searchParams.get("error")).toBe("access_denied");
      const result = await callback(t, back, flow.cookie);
      expect({ status: result.status, data: result.data }).toEqual({ status: 200, data: { outcome: "denied", appId: t.appId } });
      expect(await t.deps.store.connections.findActive(t.appId, "eve")).toMatchObject({
        fundingSource: "app",
        monthlyCapNano: usdToNanoFloor(3),
        userKey: null,
      });
      expect((await callback(t, back, flow.cookie)).status).toBe(400);
    } finally {
      await t.close();
    }
  });
});
