/**
 * Issue 5 in a real browser: an app's page on its own origin includes the proxy's popup.js,
 * the consent popup opens, the user answers, and the app's backend redeems the grant token
 * with a streamed chat call. Headless Chromium (Debian's) driven by playwright-core; a real
 * proxy process; the mock upstream over HTTP. The proxy is reached as http://localhost:PORT
 * and the app pages as http://127.0.0.1:PORT2, so the two are different sites, as in life.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { startMockUpstream, type RunningMockUpstream } from "../../packages/mock-upstream/src";
import { appPageHtml, launchChromium, serveHtml, watchPageProblems, type HtmlServer, type PageProblems } from "../helpers/browser";
import { cliCreateApp, REPO_ROOT, runCli, startServer, tempDatabase, type RunningServer } from "../helpers/server";

/**
 * What the callbacks run inside Chromium (page.evaluate, waitForFunction) touch. The project
 * compiles without the DOM lib, so these module-local declarations name just that much.
 */
interface PageElement {
  id: string;
  textContent: string | null;
}
declare const document: {
  activeElement: PageElement | null;
  body: PageElement & { append(node: PageElement): void };
  createElement(tag: "script"): PageElement;
};
declare const window: {
  receivedMessages: Array<{ origin: string; data: unknown; popupClosed?: boolean }>;
  consentPopup: { closed: boolean; postMessage(message: unknown, targetOrigin: string): void };
  injectedRan?: boolean;
};

const ARTIFACTS = join(REPO_ROOT, "test-artifacts");
const APP_NAME = "Story Helper";
/** Bounds every wait on the browser: a missing event fails the test instead of hanging it. */
const WAIT = { timeout: 20_000 };

// A real server and a browser: more room than bun's 5 s default (bunfig's [test] timeout is not read by bun test).
setDefaultTimeout(60_000);

const db = tempDatabase();
let upstream: RunningMockUpstream;
let server: RunningServer;
let proxyOrigin: string;
/** Serves the app page on the origin registered for the app. */
let appSite: HtmlServer;
/** Serves pages on an origin the app never registered. */
let strangerSite: HtmlServer;
let app: { appId: string; secretKey: string };
let browser: Browser;
let context: BrowserContext;
let problems: PageProblems;

/**
 * A page that opens the consent URL itself, without popup.js, so it never acknowledges an
 * answer. Keeps every message it receives, with whether the popup already looked closed
 * when the message arrived. On an unregistered origin it is a liar: the URL claims the
 * app's registered origin (popup.js would send its true origin).
 */
const openerPageHtml = (consentUrl: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Opens the consent page by hand</title></head>
<body><button type="button" id="ask">Open</button>
<script>
  window.receivedMessages = [];
  window.addEventListener("message", (event) => window.receivedMessages.push({ origin: event.origin, data: event.data, popupClosed: window.consentPopup.closed }));
  document.getElementById("ask").addEventListener("click", () => { window.consentPopup = window.open(${JSON.stringify(consentUrl)}, "consent", "popup"); });
</script></body></html>`;

/**
 * README "Apps without a user system: one-time grants": its HTML snippet as written, with the
 * proxy's address and the app's id filled in, in a page of its own.
 */
function readmeGrantPage(proxy: string, appId: string): string {
  const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Apps without a user system: one-time grants"));
  const snippet = /```html\n([\s\S]*?)```/.exec(section)?.[1];
  if (!snippet?.includes("http://localhost:8787") || !snippet.includes('appId: "app…"')) throw new Error("README.md: the one-time grant snippet was not found");
  const filled = snippet.replaceAll("http://localhost:8787", proxy).replaceAll('appId: "app…"', `appId: ${JSON.stringify(appId)}`);
  return `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>README snippet</title></head><body>\n${filled}</body></html>`;
}

beforeAll(async () => {
  upstream = await startMockUpstream();
  server = await startServer({ databaseUrl: db.databaseUrl, env: { UPSTREAM_BASE_URL: upstream.url, UPSTREAM_API_KEY: "sk-or-browser-test" } });
  proxyOrigin = `http://localhost:${server.port}`;
  // Pages are looked up per request, so a page that needs the app id can be added below.
  const appPages: Record<string, string> = { "/": appPageHtml(proxyOrigin) };
  appSite = serveHtml(appPages);
  app = await cliCreateApp(db.databaseUrl, APP_NAME, [appSite.origin]);
  const consentUrl = (state: string) =>
    `${proxyOrigin}/api/v1/grants/consent?${new URLSearchParams({ appId: app.appId, usd: "0.25", origin: appSite.origin, state })}`;
  appPages["/by-hand"] = openerPageHtml(consentUrl("by-hand-state"));
  appPages["/readme"] = readmeGrantPage(proxyOrigin, app.appId);
  strangerSite = serveHtml({ "/": appPageHtml(proxyOrigin), "/liar": openerPageHtml(consentUrl("liar-state")) });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await Promise.all([appSite?.stop(), strangerSite?.stop(), server?.stop(), upstream?.stop()]);
  db.cleanup();
});

beforeEach(async () => {
  context = await browser.newContext();
  problems = await watchPageProblems(context);
});

afterEach(async () => {
  await context.close();
});

/** Opens the app page on `site` with these requestGrant options, clicks its button, and returns the consent popup once loaded. */
async function openConsent(site: HtmlServer, options: Record<string, string | number>): Promise<{ page: Page; popup: Page }> {
  const page = await context.newPage();
  const query = new URLSearchParams(Object.entries({ appId: app.appId, ...options }).map(([k, v]): [string, string] => [k, String(v)]));
  await page.goto(`${site.origin}/?${query}`);
  const [popup] = await Promise.all([page.waitForEvent("popup", WAIT), page.click("#ask")]);
  await popup.waitForLoadState("load", WAIT);
  return { page, popup };
}

/** What the app page's requestGrant settled to. */
async function outcome(page: Page): Promise<{ outcome: string; value: any }> {
  const result = page.locator("#result[data-outcome]");
  await result.waitFor(WAIT);
  return { outcome: (await result.getAttribute("data-outcome"))!, value: JSON.parse((await result.textContent())!) };
}

/** Waits for the popup to close (the page's own window.close()), bounded. */
const closed = (popup: Page) => (popup.isClosed() ? Promise.resolve() : popup.waitForEvent("close", WAIT).then(() => undefined));

function expectNoCspProblems(): void {
  expect(problems.cspViolations).toEqual([]);
  expect(problems.console.filter((line) => /content.security.policy/i.test(line))).toEqual([]);
}

const receivedMessages = (page: Page) => page.evaluate(() => window.receivedMessages);

async function grantStatus(grantToken: string) {
  const res = await server.fetch("/api/v1/grants/current", { headers: { authorization: `Bearer ${app.secretKey}`, "x-service-grant": grantToken } });
  expect(res.status).toBe(200);
  return (await res.json()) as { grantId: string; usdCap: number; usedUsd: number; remainingUsd: number; uses: number; maxUses: number | null; status: string };
}

describe("the consent popup in Chromium", () => {
  test("approve: the app page receives the grant, and its backend spends it on a streamed chat call", async () => {
    const before = Date.now();
    const { page, popup } = await openConsent(appSite, { usd: 0.5, maxUses: 3, ttl: 3600 });
    expect(new URL(popup.url()).origin).toBe(proxyOrigin);
    await expect(popup.locator("h1").textContent()).resolves.toContain(APP_NAME);
    expect(await popup.locator("#origin").textContent()).toBe(appSite.origin);
    expect(await popup.locator("#amount").textContent()).toBe("Up to $0.50");
    expect(await popup.locator("#uses").textContent()).toBe("3 requests");
    const shownExpiry = Date.parse((await popup.locator("#expires time").getAttribute("datetime"))!);
    expect(shownExpiry).toBeGreaterThanOrEqual(before + 3600_000);
    expect(shownExpiry).toBeLessThanOrEqual(Date.now() + 3600_000);
    // Shown in the user's own time zone and locale, as the browser formats it.
    const localExpiry = await popup.evaluate((ms) => new Date(ms).toLocaleString(), shownExpiry);
    expect((await popup.locator("#expires").textContent())!.trim()).toBe(localExpiry);
    // Who pays and what for, in words, where the user sees it.
    const whoPays = popup.locator("#who-pays");
    expect(await whoPays.isVisible()).toBe(true);
    expect((await whoPays.innerText()).replace(/\s+/g, " ")).toBe(
      `${APP_NAME} pays for the AI model requests this grant allows: up to $0.50 over at most 3 requests, until ${localExpiry}. ` +
        `You are not charged. Approving only lets ${APP_NAME} spend up to this amount on AI requests made for you.`,
    );
    expect(await popup.locator("#payer").textContent()).toBe(`${APP_NAME}, not you`);

    const popupClosed = closed(popup);
    await popup.getByRole("button", { name: "Approve", exact: true }).click();
    const { outcome: settled, value: message } = await outcome(page);
    await popupClosed;
    expect(settled).toBe("resolved");
    expect(Object.keys(message).sort()).toEqual(["expiresAt", "grantToken", "maxUses", "state", "type", "usd"]);
    expect(message).toMatchObject({ type: "grant", usd: 0.5, maxUses: 3 });
    expect(message.grantToken).toMatch(/^gt_[0-9A-Za-z]{32,}$/);
    expect(message.state).toMatch(/^[0-9a-f]{32}$/);
    expect(Date.parse(message.expiresAt)).toBeGreaterThanOrEqual(shownExpiry);
    // Only the proxy's popup spoke to the page, and it never put the token in a URL.
    expect((await receivedMessages(page)).map((m) => m.origin)).toEqual([proxyOrigin]);
    expect(page.url()).not.toContain("gt_");
    expectNoCspProblems();

    // The app's backend redeems the token: a streamed chat call, read to the end.
    const res = await server.fetch("/api/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${app.secretKey}`, "content-type": "application/json", "x-service-grant": message.grantToken },
      body: JSON.stringify({ model: "openai/gpt-4o-mini", stream: true, max_tokens: 40, messages: [{ role: "user", content: "Tell me a short story." }] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const sse = await res.text();
    expect(sse).toContain('"usage"');
    expect(sse.trimEnd()).toEndWith("data: [DONE]");

    // Usage settles just after the stream ends: poll, bounded by a count, not a clock.
    let status = await grantStatus(message.grantToken);
    for (let i = 0; i < 200 && status.usedUsd === 0; i++) {
      await Bun.sleep(25);
      status = await grantStatus(message.grantToken);
    }
    expect(status).toMatchObject({ usdCap: 0.5, uses: 1, maxUses: 3, status: "active" });
    expect(status.usedUsd).toBeGreaterThan(0);
    expect(status.remainingUsd).toBeCloseTo(0.5 - status.usedUsd, 9);
  });

  test("deny: the promise rejects with grant_denied and the popup closes", async () => {
    // Frozen page clocks: the popup can only close because popup.js acknowledged the answer.
    await context.clock.install();
    await context.clock.pauseAt(Date.now() + 1000);
    const { page, popup } = await openConsent(appSite, { usd: 0.5 });
    const popupClosed = closed(popup);
    await popup.getByRole("button", { name: "Deny", exact: true }).click();
    const result = await outcome(page);
    await popupClosed;
    expect(result).toMatchObject({ outcome: "rejected", value: { code: "grant_denied" } });
    expect((await receivedMessages(page)).some((m) => JSON.stringify(m.data).includes("gt_"))).toBe(false);
    expectNoCspProblems();
  });

  test("closing the popup without answering rejects with popup_closed", async () => {
    const { page, popup } = await openConsent(appSite, { usd: 0.5 });
    await popup.close();
    expect(await outcome(page)).toMatchObject({ outcome: "rejected", value: { code: "popup_closed" } });
    expect(await receivedMessages(page)).toEqual([]);
  });

  test("a page on an unregistered origin gets an error page, never a grant", async () => {
    const { page, popup } = await openConsent(strangerSite, { usd: 0.5 });
    await expect(popup.getByRole("heading", { level: 1 }).textContent()).resolves.toBe("This grant request cannot be shown");
    expect(await popup.getByRole("alert").textContent()).toContain("not one of the app's registered origins");
    expect(await popup.getByRole("button").count()).toBe(0);
    const html = await popup.content();
    expect(html).not.toContain("ct_");
    expect(html).not.toContain("gt_");
    // The promise is still pending: nothing came back.
    expect(await page.locator("#result").textContent()).toBe("pending");
    await popup.close();
    expect(await outcome(page)).toMatchObject({ outcome: "rejected", value: { code: "popup_closed" } });
    expect(await receivedMessages(page)).toEqual([]);
    expectNoCspProblems();
  });

  test("a page that claims a registered origin it is not on never receives the token", async () => {
    const page = await context.newPage();
    await page.goto(`${strangerSite.origin}/liar`);
    const [popup] = await Promise.all([page.waitForEvent("popup", WAIT), page.click("#ask")]);
    await popup.waitForLoadState("load", WAIT);
    // The lie gets a normal consent page (the origin parameter alone cannot be checked)…
    expect(await popup.locator("#origin").textContent()).toBe(appSite.origin);
    // Approving works (the page closes itself once the grant exists and its message is sent;
    // with no acknowledgement from this page, after its few seconds of grace)…
    const popupClosed = closed(popup);
    await popup.getByRole("button", { name: "Approve", exact: true }).click();
    await popupClosed;
    // …but postMessage's targetOrigin (the registered origin) keeps the token from this page.
    await page.waitForFunction(() => window.consentPopup.closed, undefined, WAIT);
    expect(await receivedMessages(page)).toEqual([]);
  });

  test("the popup closes only once its opener acknowledges the answer, so an answer is never taken for a closed popup", async () => {
    // CI once saw a denial reported as popup_closed: the popup closed right after postMessage,
    // and the opener saw it closed before the message landed. Now the popup waits for
    // {type: "received"} from its opener before it closes.
    // Frozen page clocks: the popup's few-second fallback cannot close it during the test.
    await context.clock.install();
    await context.clock.pauseAt(Date.now() + 1000);
    const page = await context.newPage();
    await page.goto(`${appSite.origin}/by-hand`);
    const [popup] = await Promise.all([page.waitForEvent("popup", WAIT), page.click("#ask")]);
    await popup.waitForLoadState("load", WAIT);
    await popup.getByRole("button", { name: "Deny", exact: true }).click();
    await page.waitForFunction(() => window.receivedMessages.length > 0, undefined, WAIT);
    expect(await receivedMessages(page)).toEqual([{ origin: proxyOrigin, data: { type: "grant_denied", state: "by-hand-state" }, popupClosed: false }]);
    // Still open with the answer delivered: it is waiting for this page (for at most its grace).
    expect(popup.isClosed()).toBe(false);
    const popupClosed = closed(popup);
    await page.evaluate((target) => window.consentPopup.postMessage({ type: "received" }, target), proxyOrigin);
    await popupClosed;
  });

  test("accessibility basics; focus starts on the heading, not Approve, and Enter there approves nothing; keyboard approve; the CSP blocks injected script", async () => {
    const { page, popup } = await openConsent(appSite, { usd: 1, maxUses: 1 });
    expect(await popup.locator("html").getAttribute("lang")).toBe("en");
    expect(await popup.title()).toBe(`Allow ${APP_NAME} to spend up to $1.00`);
    expect(await popup.getByRole("heading", { level: 1 }).count()).toBe(1);
    expect(await popup.getByRole("button").count()).toBe(2);
    const approve = popup.getByRole("button", { name: "Approve", exact: true });
    const deny = popup.getByRole("button", { name: "Deny", exact: true });
    expect(await approve.count()).toBe(1);
    expect(await deny.count()).toBe(1);
    expect(await popup.locator("dl dt").allTextContents()).toEqual(["App", "Requested by", "Paid by", "Amount", "Uses", "Expires"]);
    expect(await popup.locator("#who-pays").isVisible()).toBe(true);

    // On load the heading has focus (where a screen reader starts reading), never Approve.
    const focused = () => popup.evaluate(() => (document.activeElement === document.body ? "body" : (document.activeElement?.id ?? null)));
    await popup.waitForFunction(() => document.activeElement?.id === "title", undefined, WAIT);
    expect(await focused()).not.toBe("approve");
    // Enter pressed out of habit approves nothing: Approve's click handler would have
    // disabled both buttons and said "Creating the grant…" before the key press returned.
    await popup.keyboard.press("Enter");
    expect(await approve.isEnabled()).toBe(true);
    expect(await popup.locator("#status").textContent()).toBe("");
    expect(await page.locator("#result").textContent()).toBe("pending");
    // Tab goes to Deny first, then Approve; from the top of the page, Deny is the first Tab stop.
    await popup.keyboard.press("Tab");
    expect(await focused()).toBe("deny");
    await popup.keyboard.press("Tab");
    expect(await focused()).toBe("approve");
    // A click on the page's empty top corner moves the Tab starting point to the start of the document.
    await popup.mouse.click(1, 1);
    expect(await focused()).toBe("body");
    await popup.keyboard.press("Tab");
    expect(await focused()).toBe("deny");
    expectNoCspProblems();

    // The CSP holds: an inline script injected into the page is refused and reported.
    const violation = problems.nextCspViolation();
    const ran = await popup.evaluate(() => {
      const script = document.createElement("script");
      script.textContent = "window.injectedRan = true";
      document.body.append(script);
      return window.injectedRan === true;
    });
    expect(ran).toBe(false);
    expect(await violation).toStartWith("script-src-elem inline @ " + proxyOrigin);
    problems.cspViolations.length = 0;
    problems.console.length = 0;

    // Keyboard approve: focus Approve, press Enter.
    const popupClosed = closed(popup);
    await approve.focus();
    // Approving closes the popup, which can happen between the key's down and up events on a
    // loaded machine: a press that fails only because the page closed is the expected end.
    await popup.keyboard.press("Enter").catch((err: unknown) => {
      if (!/has been closed/.test(String(err))) throw err;
    });
    const result = await outcome(page);
    await popupClosed;
    expect(result.outcome).toBe("resolved");
    expect(result.value).toMatchObject({ type: "grant", usd: 1, maxUses: 1 });
    expect(result.value.grantToken).toMatch(/^gt_/);
    expectNoCspProblems();
  });

  test("approvals scripted elsewhere use up nothing: past the app's daily ceiling, the user's own approval still gets its grant", async () => {
    const created = await runCli(db.databaseUrl, "app", "create", "--name", "Capped App", "--origin", appSite.origin, "--grant-daily-ceiling-usd", "0.75");
    expect(created.code).toBe(0);
    const capped = created.json[0] as { appId: string };
    const { page, popup } = await openConsent(appSite, { appId: capped.appId, usd: 0.5 });
    expect(await popup.locator("#amount").textContent()).toBe("Up to $0.50");
    // Meanwhile a script approves two more $0.50 grants for the same app: $1.00 approved
    // against a $0.75 ceiling, which counts what grants spend, not what is approved.
    for (let i = 0; i < 2; i++) {
      const other = await server.fetch(`/api/v1/grants/consent?${new URLSearchParams({ appId: capped.appId, usd: "0.5", origin: appSite.origin })}`);
      const consentToken = /"consentToken":"(ct_[0-9A-Za-z]+)"/.exec(await other.text())![1]!;
      const scripted = await server.fetch("/api/v1/grants/consent", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ consentToken }),
      });
      expect(scripted.status).toBe(200);
    }

    const popupClosed = closed(popup);
    await popup.getByRole("button", { name: "Approve", exact: true }).click();
    const result = await outcome(page);
    await popupClosed;
    expect(result.outcome).toBe("resolved");
    expect(result.value).toMatchObject({ type: "grant", usd: 0.5 });
    const grants = await runCli(db.databaseUrl, "grants", "list", "--app", capped.appId);
    expect(grants.json).toHaveLength(3);
    expectNoCspProblems();
  });

  test("the README's snippet, as written: it loads without an error, and its button gets the grant", async () => {
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (err) => errors.push(err.message));
    // Keeps what requestGrant resolved with, without touching the snippet: popup.js defines
    // MeteredProxy, and the setter wraps its requestGrant as it arrives.
    await page.addInitScript(() => {
      const page = globalThis as unknown as { grantSeen?: unknown };
      let helper: { requestGrant(options: unknown): Promise<unknown> } | undefined;
      Object.defineProperty(globalThis, "MeteredProxy", {
        get: () => helper,
        set(value: { requestGrant(options: unknown): Promise<unknown> }) {
          const requestGrant = value.requestGrant.bind(value);
          helper = { ...value, requestGrant: (options: unknown) => requestGrant(options).then((grant) => (page.grantSeen = grant)) };
        },
      });
    });
    await page.goto(`${appSite.origin}/readme`);
    expect(errors).toEqual([]);
    const [popup] = await Promise.all([page.waitForEvent("popup", WAIT), page.click("#ask-budget")]);
    await popup.waitForLoadState("load", WAIT);
    expect(await popup.locator("#amount").textContent()).toBe("Up to $2.00");
    expect(await popup.locator("#uses").textContent()).toBe("20 requests");
    const popupClosed = closed(popup);
    await popup.getByRole("button", { name: "Approve", exact: true }).click();
    await popupClosed;
    await page.waitForFunction(() => (globalThis as unknown as { grantSeen?: unknown }).grantSeen !== undefined, undefined, WAIT);
    const grant = (await page.evaluate(() => (globalThis as unknown as { grantSeen: unknown }).grantSeen)) as { type: string; grantToken: string };
    expect(grant).toMatchObject({ type: "grant", usd: 2, maxUses: 20 });
    expect(grant.grantToken).toMatch(/^gt_/);
    expect(errors).toEqual([]);
    expectNoCspProblems();
  });

  test("a screenshot of the consent page is kept as a test artifact", async () => {
    const { popup } = await openConsent(appSite, { usd: 2.5, maxUses: 10, ttl: 7 * 24 * 3600 });
    await popup.setViewportSize({ width: 480, height: 640 });
    mkdirSync(ARTIFACTS, { recursive: true });
    const path = join(ARTIFACTS, "consent-page.png");
    const png = await popup.screenshot({ path, fullPage: true });
    expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    expect(await Bun.file(path).exists()).toBe(true);
    expectNoCspProblems();
  });
});
