/**
 * `@metered-proxy/client/browser` in headless Chromium: the built package (dist/) loaded as
 * an ES module by an app's page on its registered origin, against a real server process.
 * connect() through the hosted connect page, getConnection(), revoke(), requestGrant()
 * through the consent page (approved and denied), a closed popup, and a ProxyError subclass
 * thrown for the service's error answer.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { launchChromium, watchPageProblems, type HtmlServer, type PageProblems } from "../helpers/browser";
import { cliCreateApp, REPO_ROOT, startServer, tempDatabase, type RunningServer } from "../helpers/server";

declare const window: { run(action: string, input?: unknown): Promise<unknown> };

const DIST = join(REPO_ROOT, "packages", "client", "dist");
const WAIT = { timeout: 20_000 };
setDefaultTimeout(90_000);

const db = tempDatabase();
let server: RunningServer;
let site: HtmlServer;
let app: { appId: string; secretKey: string };
let browser: Browser;
let context: BrowserContext;
let problems: PageProblems;
/** What the page's getSessionToken hands out: a fresh token for alice, or this string. */
let tokenOverride: string | null = null;

/** The app's page: the library from /client/browser.js, and `window.run(action, input)` for the test to call. */
const pageHtml = (proxyOrigin: string, appId: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Demo app</title></head>
<body><button type="button" id="go">Go</button>
<script type="module">
  import { createBrowserClient, ProxyError, PopupClosedError, GrantDeniedError } from "/client/browser.js";
  const client = createBrowserClient({
    baseUrl: ${JSON.stringify(proxyOrigin)},
    appId: ${JSON.stringify(appId)},
    getSessionToken: async () => (await (await fetch("/token")).json()).token,
  });
  const describe = (err) => ({
    error: err.name, code: err.code, status: err.status, isProxyError: err instanceof ProxyError,
    isPopupClosed: err instanceof PopupClosedError, isDenied: err instanceof GrantDeniedError, message: err.message,
  });
  let pending = null;
  // Popups need a user gesture: the test clicks #go, which starts the action it queued.
  document.getElementById("go").addEventListener("click", () => pending && pending());
  window.run = (action, input) => new Promise((resolve) => {
    const start = () => client[action](input).then((value) => resolve({ value: value ?? null }), (err) => resolve(describe(err)));
    if (action === "connect" || action === "requestGrant") pending = start; else start();
  });
</script></body></html>`;

beforeAll(async () => {
  // The browser loads the built files: build them, as npm test's build step does.
  const build = Bun.spawnSync([process.execPath, "x", "tsc", "-p", "packages/client"], { cwd: REPO_ROOT });
  if (build.exitCode !== 0) throw new Error(`building packages/client failed: ${build.stdout}${build.stderr}`);
  server = await startServer({ databaseUrl: db.databaseUrl });
  const proxyOrigin = `http://localhost:${server.port}`;
  let appId = "";
  const s = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(request) {
      const path = new URL(request.url).pathname;
      if (path === "/token") {
        if (tokenOverride !== null) return Response.json({ token: tokenOverride });
        // What the app's backend does with the server entry's createSession.
        const minted = await server.fetch("/api/v1/sessions", {
          method: "POST",
          headers: { authorization: `Bearer ${app.secretKey}`, "content-type": "application/json" },
          body: JSON.stringify({ appUserId: "alice", requestLimit: { monthlyUsd: 20 } }),
        });
        return new Response(minted.body, { headers: { "content-type": "application/json" } });
      }
      if (path.startsWith("/client/") && /^\/client\/[a-z-]+\.js$/.test(path)) {
        return new Response(Bun.file(join(DIST, path.slice("/client/".length))), { headers: { "content-type": "text/javascript" } });
      }
      return new Response(pageHtml(proxyOrigin, appId), { headers: { "content-type": "text/html; charset=utf-8" } });
    },
  });
  site = { origin: `http://127.0.0.1:${s.port}`, stop: () => s.stop(true) };
  app = await cliCreateApp(db.databaseUrl, "Story Helper", [site.origin]);
  appId = app.appId;
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await Promise.all([site?.stop(), server?.stop()]);
  db.cleanup();
});

beforeEach(async () => {
  tokenOverride = null;
  context = await browser.newContext();
  problems = await watchPageProblems(context);
});

afterEach(async () => {
  await context.close();
});

/**
 * Stops the pages' clocks (timers never fire): a popup that closes then closed because its
 * opener acknowledged the answer, never by the pages' few-second fallback.
 */
async function freezePageClocks(): Promise<void> {
  await context.clock.install();
  await context.clock.pauseAt(Date.now() + 1000);
}

async function appPage(): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${site.origin}/`);
  await page.waitForFunction(() => typeof window.run === "function", undefined, WAIT);
  return page;
}

/** Queues a popup action, clicks (the user gesture), and returns the popup with the action's result promise. */
async function withPopup(page: Page, action: string, input: unknown): Promise<{ popup: Page; result: Promise<any> }> {
  const result = page.evaluate(([a, i]) => window.run(a as string, i), [action, input] as const);
  const [popup] = await Promise.all([page.waitForEvent("popup", WAIT), page.click("#go")]);
  await popup.waitForLoadState("load", WAIT);
  return { popup, result };
}

const run = (page: Page, action: string, input?: unknown): Promise<any> => page.evaluate(([a, i]) => window.run(a as string, i), [action, input] as const);

describe("@metered-proxy/client/browser in Chromium", () => {
  test("connect() approves a cap on the hosted page; getConnection() and revoke() with the session token", async () => {
    const page = await appPage();
    const { popup, result } = await withPopup(page, "connect", { monthlyUsd: 8 });
    await popup.locator("#current").filter({ hasText: "Not connected" }).waitFor(WAIT);
    expect(await popup.inputValue("#cap")).toBe("8");
    await popup.click("#approve");
    expect(await result).toMatchObject({ value: { type: "connected", monthlyUsd: 8 } });
    expect(await run(page, "getConnection")).toMatchObject({ value: { connected: true, appUserId: "alice", limits: { monthlyUsd: 8 }, fundingStatus: "ok" } });
    expect(await run(page, "revoke")).toEqual({ value: null });
    expect(await run(page, "getConnection")).toMatchObject({ value: { connected: false } });
    expect(problems.cspViolations).toEqual([]);
  });

  test("requestGrant() resolves with the grant the user approved; Deny rejects with GrantDeniedError", async () => {
    const page = await appPage();
    const approved = await withPopup(page, "requestGrant", { usd: 0.5, maxUses: 2, state: "s1" });
    const approvedClosed = approved.popup.waitForEvent("close", WAIT);
    await approved.popup.click("#approve");
    const { value } = await approved.result;
    expect(value).toMatchObject({ usd: 0.5, maxUses: 2, state: "s1" });
    const grant = await server.fetch("/api/v1/grants/current", { headers: { authorization: `Bearer ${app.secretKey}`, "x-service-grant": value.grantToken } });
    expect(Object.keys(value).sort()).toEqual(["expiresAt", "grantToken", "maxUses", "state", "usd"]);
    expect(await grant.json()).toMatchObject({ status: "active", usdCap: 0.5, maxUses: 2 });
    // The library opens its popups under one window name: asked again before the answered
    // popup has closed, the browser would reuse that closing window instead of opening one.
    await approvedClosed;

    const denied = await withPopup(page, "requestGrant", { usd: 0.5 });
    await denied.popup.click("#deny");
    expect(await denied.result).toMatchObject({ error: "GrantDeniedError", isDenied: true });
  });

  test("Cancel on the connect page resolves connect() with connect_cancelled, and the page closes once the library has the answer", async () => {
    await freezePageClocks();
    const page = await appPage();
    const { popup, result } = await withPopup(page, "connect", {});
    await popup.locator("#current").filter({ hasText: "Not connected" }).waitFor(WAIT);
    const popupClosed = popup.waitForEvent("close", WAIT);
    await popup.click("#cancel");
    expect(await result).toMatchObject({ value: { type: "connect_cancelled" } });
    await popupClosed;
  });

  test("after Approve the connect page closes once the library has the answer, so nothing is changed there unheard", async () => {
    await freezePageClocks();
    const page = await appPage();
    const { popup, result } = await withPopup(page, "connect", { monthlyUsd: 3 });
    await popup.locator("#current").filter({ hasText: "Not connected" }).waitFor(WAIT);
    const popupClosed = popup.waitForEvent("close", WAIT);
    await popup.click("#approve");
    expect(await result).toMatchObject({ value: { type: "connected", monthlyUsd: 3, fundingSource: "app" } });
    await popupClosed;
  });

  test("connect({ funding: 'user' }) asks the page for the user's own account, which this app does not allow: the page says so", async () => {
    const page = await appPage();
    const { popup, result } = await withPopup(page, "connect", { funding: "user" });
    expect(new URL(popup.url()).searchParams.get("funding")).toBe("user");
    await popup.getByText("This app does not let its users pay with their own upstream account.").waitFor(WAIT);
    await popup.close();
    expect(await result).toMatchObject({ error: "PopupClosedError" });
  });

  test("a popup closed before it answers rejects with PopupClosedError", async () => {
    const page = await appPage();
    const { popup, result } = await withPopup(page, "connect", {});
    await popup.close();
    expect(await result).toMatchObject({ error: "PopupClosedError", isPopupClosed: true });
  });

  test("the service's error answer is thrown as its ProxyError subclass", async () => {
    tokenOverride = "not-a-session-token";
    const page = await appPage();
    expect(await run(page, "getConnection")).toMatchObject({ error: "AuthError", code: "auth", status: 401, isProxyError: true });
  });

  test("from an origin the app did not register, the refused answer is a ProxyUnreachableError naming the page's origin", async () => {
    // The same page and port as localhost: another origin than the registered 127.0.0.1 one.
    const stranger = site.origin.replace("127.0.0.1", "localhost");
    const page = await context.newPage();
    await page.goto(`${stranger}/`);
    await page.waitForFunction(() => typeof window.run === "function", undefined, WAIT);
    const failed = await run(page, "getConnection");
    expect(failed).toMatchObject({ error: "ProxyUnreachableError", isProxyError: false });
    expect(failed.message).toContain(`could not reach the metered proxy at http://localhost:${server.port}/api/v1/connections`);
    expect(failed.message).toContain(`is this page's origin (${stranger}) one the app registered (--origin)?`);
    problems.console.length = 0;
  });
});
