/**
 * Drives the funding flow (src/services/funding-link.ts) through app.handle in demo mode: an
 * app on a given store engine whose users may pay themselves, the start, the demo upstream's
 * page with Approve or Deny, and the callback as a browser follows the redirect.
 */
import { expect } from "bun:test";
import { createApp } from "../../src/app";
import { createDeps, type Deps } from "../../src/deps";
import { loadConfig } from "../../src/config";
import { ManualClock } from "../../src/clock";
import { memoryLogger } from "../../src/logger";
import { demoUpstreamClient, type DemoUpstreamClient } from "../../src/upstream/demo-upstream";
import * as mockUpstream from "../../packages/mock-upstream/src";
import { createAppWithKey } from "../../src/services/operator/secret-keys";
import type { FundingSource } from "../../src/store/connections";
import { openSqliteStore } from "../../src/store/sqlite";
import type { StoreOpener } from "./store-engines";
import { TEST_JWT_SECRET, T0 } from "./test-app";
import { formFields, pageCookie } from "../upstream/pkce-helpers";

export const PUBLIC_URL = "http://localhost:8787";
export const CALLBACK = `${PUBLIC_URL}/api/v1/connect/funding/callback`;
const ORIGIN = "http://localhost:3000";

export interface FundingApp {
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

export async function fundingApp(open: StoreOpener, sources: FundingSource[] = ["app", "user"]): Promise<FundingApp> {
  const config = loadConfig({ JWT_SECRET: TEST_JWT_SECRET, DEMO_STREAM_TOKENS_PER_SECOND: "0", PUBLIC_URL });
  const clock = new ManualClock(T0);
  const logger = memoryLogger();
  const store = await open();
  const upstream = demoUpstreamClient(mockUpstream, config);
  const deps = createDeps(config, { store, clock, logger, upstream });
  const app = createApp(deps);
  const { app: created, key } = await createAppWithKey(store.apps, "payers", [ORIGIN], clock.now(), { fundingSources: sources });
  return {
    deps,
    clock,
    logs: logger.lines,
    upstream,
    appId: created.id,
    session: async (user, limit) => (await deps.sessionTokens.mint(created.id, key.keyId, user, limit ?? null)).token,
    call: (url, init) => app.handle(new Request(url.startsWith("/") ? `${PUBLIC_URL}${url}` : url, init)),
    close: () => store.close(),
  };
}

export const openSqlite: StoreOpener = async () => openSqliteStore(":memory:");
export const json = async (r: Response): Promise<any> => r.json();

/** POST /connections/funding: the authorize URL and the cookie that binds the flow. */
export async function start(t: FundingApp, token: string, body: unknown = { monthlyUsd: 5 }): Promise<{ authorizeUrl: URL; cookie: string }> {
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
export async function decide(t: FundingApp, authorizeUrl: URL, decision: "approve" | "deny"): Promise<URL> {
  const page = await t.call(authorizeUrl.toString());
  expect(page.status).toBe(200);
  const form = new URLSearchParams({ ...formFields(await page.text()), decision });
  const answer = await t.call(authorizeUrl.toString(), {
    method: "POST",
    // The page's CSRF cookie, as the browser sends it back with the form.
    headers: { "content-type": "application/x-www-form-urlencoded", cookie: pageCookie(page) },
    body: form.toString(),
  });
  expect(answer.status).toBe(303);
  return new URL(answer.headers.get("location")!);
}

/** The callback, as the browser follows the redirect (with its cookie, if any): status, page data, headers. */
export async function callback(t: FundingApp, url: URL | string, cookie: string | null) {
  const res = await t.call(url.toString(), { headers: cookie ? { cookie } : {} });
  const html = await res.text();
  const blob = /<script type="application\/json" id="funding-result">([^<]*)<\/script>/.exec(html)?.[1];
  return { status: res.status, data: JSON.parse(blob!) as any, html, headers: res.headers };
}

export async function linkedKey(t: FundingApp, user: string): Promise<string | null> {
  return t.deps.store.connections.userUpstreamKey(t.appId, user);
}
