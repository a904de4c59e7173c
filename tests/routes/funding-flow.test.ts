/**
 * Linking a user's own upstream account (issue 34): POST /connections/funding starts the PKCE
 * flow, the demo upstream's page (mounted on the service's origin in demo mode) approves or
 * denies, and GET /connect/funding/callback takes the flow once, exchanges the code and links
 * the key. On both store engines, with the in-process mock as the upstream.
 */
import { describe, expect, test } from "bun:test";
import { createApp } from "../../src/app";
import { createDeps, type Deps } from "../../src/deps";
import { loadConfig } from "../../src/config";
import { ManualClock } from "../../src/clock";
import { memoryLogger } from "../../src/logger";
import { demoUpstreamClient, type DemoUpstreamClient } from "../../src/upstream/demo-upstream";
import * as mockUpstream from "../../packages/mock-upstream/src";
import { createAppWithKey } from "../../src/services/operator/secret-keys";
import { FUNDING_FLOW_LIFETIME_MS } from "../../src/services/funding-link";
import { userKeyFingerprint } from "../../src/store/connections";
import type { FundingSource } from "../../src/store/connections";
import { usdToNanoFloor } from "../../src/money";
import { openSqliteStore } from "../../src/store/sqlite";
import { storeEngines, type StoreOpener } from "../helpers/store-engines";
import { TEST_JWT_SECRET, T0 } from "../helpers/test-app";
import { formFields, pkcePair } from "../upstream/pkce-helpers";

const PUBLIC_URL = "http://localhost:8787";
const CALLBACK = `${PUBLIC_URL}/api/v1/connect/funding/callback`;
const ORIGIN = "http://localhost:3000";

interface FundingApp {
  deps: Deps;
  clock: ManualClock;
  logs: string[];
  upstream: DemoUpstreamClient;
  appId: string;
  /** A session token for `user` (of the app), and its flow cookie once a flow is started. */
  session(user: string, requestLimitUsd?: number): Promise<string>;
  call(url: string, init?: RequestInit): Promise<Response>;
  close(): Promise<void>;
}

async function fundingApp(open: StoreOpener, sources: FundingSource[] = ["app", "user"]): Promise<FundingApp> {
  const config = loadConfig({ JWT_SECRET: TEST_JWT_SECRET, DEMO_STREAM_TOKENS_PER_SECOND: "0", PUBLIC_URL });
  const clock = new ManualClock(T0);
  const logger = memoryLogger();
  const store = await open();
  const upstream = demoUpstreamClient(mockUpstream, config);
  const deps = createDeps(config, { store, clock, logger, upstream });
  const app = createApp(deps);
  const { app: created } = await createAppWithKey(store.apps, "payers", [ORIGIN], clock.now(), { fundingSources: sources });
  return {
    deps,
    clock,
    logs: logger.lines,
    upstream,
    appId: created.id,
    session: async (user, limit) => (await deps.sessionTokens.mint(created.id, user, limit ?? null)).token,
    call: (url, init) => app.handle(new Request(url.startsWith("/") ? `${PUBLIC_URL}${url}` : url, init)),
    close: () => store.close(),
  };
}

const openSqlite: StoreOpener = async () => openSqliteStore(":memory:");
const json = async (r: Response): Promise<any> => r.json();

/** POST /connections/funding: the authorize URL and the cookie that binds the flow. */
async function start(t: FundingApp, token: string, body: unknown = { monthlyUsd: 5 }): Promise<{ authorizeUrl: URL; cookie: string }> {
  const res = await t.call("/api/v1/connections/funding", {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await json(res);
  expect({ status: res.status, answer: typeof answer.authorizeUrl }).toEqual({ status: 201, answer: "string" });
  const setCookie = res.headers.get("set-cookie")!;
  expect(setCookie).toMatch(/^mp_funding_session=[^;]+; Max-Age=600; HttpOnly; SameSite=Lax; Path=\/api\/v1\/connect\/funding\/callback$/);
  return { authorizeUrl: new URL(answer.authorizeUrl), cookie: setCookie.slice(0, setCookie.indexOf(";")) };
}

/** The demo upstream's page on the service's origin, then a press of Approve or Deny: the callback URL it redirects to. */
async function decide(t: FundingApp, authorizeUrl: URL, decision: "approve" | "deny"): Promise<URL> {
  const page = await t.call(authorizeUrl.toString());
  expect(page.status).toBe(200);
  const form = new URLSearchParams({ ...formFields(await page.text()), decision });
  const answer = await t.call(authorizeUrl.toString(), {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: form.toString(),
  });
  expect(answer.status).toBe(303);
  return new URL(answer.headers.get("location")!);
}

/** The callback, as the browser follows the redirect (with its cookie, if any): status, page data, headers. */
async function callback(t: FundingApp, url: URL | string, cookie: string | null) {
  const res = await t.call(url.toString(), { headers: cookie ? { cookie } : {} });
  const html = await res.text();
  const blob = /<script type="application\/json" id="funding-result">([^<]*)<\/script>/.exec(html)?.[1];
  return { status: res.status, data: JSON.parse(blob!) as any, html, headers: res.headers };
}

async function linkedKey(t: FundingApp, user: string): Promise<string | null> {
  return t.deps.store.connections.userUpstreamKey(t.appId, user);
}

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

describe("the code exchange refused by the upstream", () => {
  const open = openSqlite;

  test("a code used before (the mock: 400) and a verifier that does not match the challenge (the mock: 403): 400 page, connection unchanged", async () => {
    const t = await fundingApp(open);
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

describe("an app's funding sources", () => {
  const open = openSqlite;

  test("without `user`: the start is refused (400), no flow and no cookie", async () => {
    const t = await fundingApp(open, ["app"]);
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
    const t = await fundingApp(open, ["user"]);
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
