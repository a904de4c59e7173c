/**
 * The hosted connect page in a real browser: an app's page on its registered origin opens
 * it, hands it the user's session token when it says it is ready, and the user approves,
 * lowers and revokes the monthly cap; the app's backend sees each change. A page on
 * another origin that opens the same URL cannot hand it a token. Headless Chromium; a real
 * proxy process (reached as http://localhost:PORT, the app pages as http://127.0.0.1:PORT2).
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { launchChromium, watchPageProblems, type HtmlServer, type PageProblems } from "../helpers/browser";
import { cliCreateApp, REPO_ROOT, startServer, tempDatabase, type RunningServer } from "../helpers/server";

declare const document: { activeElement: { id: string } | null; getElementById(id: string): unknown };
declare function getComputedStyle(element: unknown): { color: string; outlineStyle: string };
interface MessageWindow {
  postMessage(message: unknown, targetOrigin: string): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
  removeEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
}
declare const window: MessageWindow & { events: Array<{ type: string; [key: string]: unknown }>; popup: MessageWindow; token: string };

const ARTIFACTS = join(REPO_ROOT, "test-artifacts");
const APP_NAME = "Story Helper";
const WAIT = { timeout: 20_000 };
setDefaultTimeout(60_000);

const db = tempDatabase();
let server: RunningServer;
let proxyOrigin: string;
let appSite: HtmlServer;
let strangerSite: HtmlServer;
let app: { appId: string; secretKey: string };
let browser: Browser;
let context: BrowserContext;
let problems: PageProblems;

/**
 * An app page: its button opens the connect page for `user` (the session token is minted by
 * the test, as the app's backend would, and fetched from `/token`), and it answers the
 * page's `connect_ready` with that token, at the proxy's origin only. Every message from the
 * proxy is kept in `window.events`. `claimedOrigin` lets a stranger's page lie about its origin.
 */
const openerHtml = (claimedOrigin: string | null) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Demo app</title></head>
<body><button type="button" id="open">Connect</button>
<script>
  window.events = [];
  const proxy = ${JSON.stringify(proxyOrigin)};
  document.getElementById("open").addEventListener("click", async () => {
    const { token, appId } = await (await fetch("/token")).json();
    window.token = token;
    const origin = ${claimedOrigin === null ? "location.origin" : JSON.stringify(claimedOrigin)};
    const query = new URLSearchParams({ appId, origin, monthlyUsd: "12" });
    const popup = (window.popup = window.open(proxy + "/api/v1/connect?" + query, "connect", "popup"));
    window.addEventListener("message", (event) => {
      if (event.origin !== proxy || event.source !== popup) return;
      window.events.push(event.data);
      if (event.data && event.data.type === "connect_ready") popup.postMessage({ type: "session", token }, proxy);
    });
  });
</script></body></html>`;

/** Serves the opener page and a fresh session token for `alice` (what an app's backend does). */
function siteServing(html: () => string): HtmlServer {
  const s = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(request) {
      if (new URL(request.url).pathname === "/token") {
        const minted = await server.fetch("/api/v1/sessions", {
          method: "POST",
          headers: { authorization: `Bearer ${app.secretKey}`, "content-type": "application/json" },
          body: JSON.stringify({ appUserId: "alice", requestLimit: { monthlyUsd: 20 } }),
        });
        const { token } = (await minted.json()) as { token: string };
        return Response.json({ token, appId: app.appId });
      }
      return new Response(html(), { headers: { "content-type": "text/html; charset=utf-8" } });
    },
  });
  return { origin: `http://127.0.0.1:${s.port}`, stop: () => s.stop(true) };
}

beforeAll(async () => {
  server = await startServer({ databaseUrl: db.databaseUrl });
  proxyOrigin = `http://localhost:${server.port}`;
  let registered = "";
  appSite = siteServing(() => openerHtml(null));
  registered = appSite.origin;
  strangerSite = siteServing(() => openerHtml(registered));
  app = await cliCreateApp(db.databaseUrl, APP_NAME, [registered]);
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await Promise.all([appSite?.stop(), strangerSite?.stop(), server?.stop()]);
  db.cleanup();
});

beforeEach(async () => {
  context = await browser.newContext();
  problems = await watchPageProblems(context);
});

afterEach(async () => {
  await context.close();
});

async function openConnect(site: HtmlServer): Promise<{ page: Page; popup: Page }> {
  const page = await context.newPage();
  await page.goto(`${site.origin}/`);
  const [popup] = await Promise.all([page.waitForEvent("popup", WAIT), page.click("#open")]);
  await popup.waitForLoadState("load", WAIT);
  return { page, popup };
}

async function status(): Promise<{ connected: boolean; limits: { monthlyUsd: number } }> {
  const res = await server.fetch("/api/v1/status?appUserId=alice", { headers: { authorization: `Bearer ${app.secretKey}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as { connected: boolean; limits: { monthlyUsd: number } };
}

const eventsOf = (page: Page) => page.evaluate(() => window.events);

/** The connect page's error colour (#a50e0e), as computed styles give it. */
const ERROR_RED = "rgb(165, 14, 14)";
const colourOf = (page: Page, id: string) => page.evaluate((i) => getComputedStyle(document.getElementById(i)).color, id);

/**
 * Returns once `page` has handled every message queued to it before this call: it posts
 * itself a probe, and posted messages are handled in order (HTML, "posted message task
 * source"), so no wait on the clock is needed to see that something did not happen.
 */
const settled = (page: Page) =>
  page.evaluate(
    () =>
      new Promise<void>((resolve) => {
        const probe = (event: { data: unknown }) => {
          if (event.data !== "__probe") return;
          window.removeEventListener("message", probe);
          resolve();
        };
        window.addEventListener("message", probe);
        window.postMessage("__probe", "*");
      }),
  );
const waitForEvent = (page: Page, type: string) =>
  page.waitForFunction((wanted) => window.events.some((e) => e.type === wanted), type, WAIT).then(() => eventsOf(page));

describe("the hosted connect page in Chromium", () => {
  test("approve, lower and revoke: the opener hears each, the backend sees each", async () => {
    const { page, popup } = await openConnect(appSite);
    expect(new URL(popup.url()).origin).toBe(proxyOrigin);
    await popup.locator("#current").filter({ hasText: "Not connected" }).waitFor(WAIT);
    expect(await popup.locator("h1").textContent()).toContain(APP_NAME);
    expect(await popup.locator("#origin").textContent()).toBe(appSite.origin);
    expect(await popup.locator("#user").textContent()).toBe("alice");
    expect(await popup.locator("#who-pays").textContent()).toContain("up to $12.00 a month");
    expect(await popup.inputValue("#cap")).toBe("12");
    // Nothing but the heading has focus: an Enter pressed by habit approves nothing. It is not a
    // control, so it wears no focus ring.
    expect(await popup.evaluate(() => document.activeElement?.id)).toBe("title");
    expect(await popup.evaluate(() => getComputedStyle(document.getElementById("title")).outlineStyle)).toBe("none");
    await popup.keyboard.press("Enter");
    expect((await status()).connected).toBe(false);

    mkdirSync(ARTIFACTS, { recursive: true });
    await popup.screenshot({ path: join(ARTIFACTS, "connect-page.png") });

    await popup.click("#approve");
    const afterApprove = await waitForEvent(page, "connected");
    expect(afterApprove.find((e) => e.type === "connected")).toMatchObject({ type: "connected", monthlyUsd: 12 });
    expect(await status()).toMatchObject({ connected: true, limits: { monthlyUsd: 12 } });
    await popup.locator("#current").filter({ hasText: "Connected, $12.00 a month" }).waitFor(WAIT);

    await popup.fill("#cap", "7");
    await popup.click("#approve");
    await popup.locator("#current").filter({ hasText: "$7.00" }).waitFor(WAIT);
    expect(await status()).toMatchObject({ connected: true, limits: { monthlyUsd: 7 } });

    await popup.click("#revoke");
    await waitForEvent(page, "revoked");
    expect((await status()).connected).toBe(false);
    expect(await popup.locator("#used").textContent()).toContain("$0.00");
    expect(problems.cspViolations).toEqual([]);
  });

  test("above the session's requested limit is refused, and said on the page", async () => {
    const { popup } = await openConnect(appSite);
    await popup.locator("#current").filter({ hasText: "Not connected" }).waitFor(WAIT);
    await popup.fill("#cap", "25");
    await popup.click("#approve");
    await popup.locator("#status").filter({ hasText: "may not exceed the limit the app requested" }).waitFor(WAIT);
    expect((await status()).connected).toBe(false);
    // What went wrong is in the error colour.
    expect(await colourOf(popup, "status")).toBe(ERROR_RED);
  });

  test("a page on another origin that opens the same URL cannot hand it a token", async () => {
    const { page, popup } = await openConnect(strangerSite);
    await popup.locator("#status").waitFor(WAIT);
    // The stranger claims the registered origin in the URL: the page's "ready" goes to that
    // origin, not to the stranger, and a token the stranger posts anyway is ignored.
    await page.evaluate(() => window.popup.postMessage({ type: "session", token: window.token }, "*"));
    await settled(popup);
    await settled(page);
    expect(await eventsOf(page)).toEqual([]);
    expect(await popup.locator("#status").textContent()).toContain("Waiting for");
    // Waiting is no error: not in the error colour.
    expect(await colourOf(popup, "status")).not.toBe(ERROR_RED);
    expect(await popup.isDisabled("#approve")).toBe(true);
    expect((await status()).connected).toBe(false);
  });

  test("what was used shows to the nano-dollar: a short call's $0.0000… is not $0.00", async () => {
    // Alice approves over HTTP and makes one short call (demo mode: the built-in mock).
    const auth = { authorization: `Bearer ${app.secretKey}`, "content-type": "application/json" };
    const session = await server.fetch("/api/v1/sessions", {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ appUserId: "alice", requestLimit: { monthlyUsd: 20 } }),
    });
    const { token } = (await session.json()) as { token: string };
    expect((await server.fetch("/api/v1/connections", { method: "POST", headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    const chat = await server.fetch("/api/v1/chat/completions", {
      method: "POST",
      headers: { ...auth, "x-service-user": "alice" },
      body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "Hi [[mock tokens=3]]" }] }),
    });
    expect(chat.status).toBe(200);
    let used = 0;
    for (let i = 0; i < 200 && used === 0; i++) {
      const res = await server.fetch("/api/v1/status?appUserId=alice", { headers: { authorization: `Bearer ${app.secretKey}` } });
      used = ((await res.json()) as { usage: { monthlyUsd: number } }).usage.monthlyUsd;
      if (used === 0) await Bun.sleep(25);
    }
    expect(used).toBeGreaterThan(0);
    expect(used).toBeLessThan(0.005);

    const { popup } = await openConnect(appSite);
    await popup.locator("#current").filter({ hasText: "Connected" }).waitFor(WAIT);
    const shown = (await popup.locator("#used").textContent())!;
    expect(shown).toStartWith(`$${used.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 9 })} (resets `);
    expect(shown).not.toStartWith("$0.00 ");
    expect(await popup.locator("#current").textContent()).toBe("Connected, $20.00 a month");
  });
});
