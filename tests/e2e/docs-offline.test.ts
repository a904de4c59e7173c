/**
 * Issue 13, item 4 in a real browser: the API reference of a real server process, in
 * headless Chromium with every request to another origin refused (and recorded), renders
 * every operation from the service's own files, under its CSP, in a sandbox. A screenshot
 * is kept as test-artifacts/docs-page.png.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { launchChromium, watchPageProblems, type PageProblems } from "../helpers/browser";
import { REPO_ROOT, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { version } from "../../package.json";

/** What the callbacks run inside Chromium touch (the project compiles without the DOM lib). */
declare const document: { body: { append(node: unknown): void }; createElement(tag: "script"): { textContent: string } };
declare const window: { injectedRan?: boolean; origin: string; localStorage: { length: number } };

const ARTIFACTS = join(REPO_ROOT, "test-artifacts");
/** Bounds every wait on the browser: a missing element fails the test instead of hanging it. */
const WAIT = { timeout: 20_000 };
/** Everything the page needs, all of it from the service. */
const PAGE_FILES = ["/api/v1/docs", "/docs", "/docs/start.js", "/docs/swagger-ui.css", "/docs/swagger-ui.js"];

// A real server and a browser: more room than bun's 5 s default.
setDefaultTimeout(60_000);

const db = tempDatabase();
let server: RunningServer;
let browser: Browser;
let operations: Array<{ method: string; path: string; summary: string }>;
let context: BrowserContext;
let problems: PageProblems;
/** Paths the browser asked the server for, and every URL it tried elsewhere (refused). */
let asked: string[];
let elsewhere: string[];

beforeAll(async () => {
  server = await startServer({ databaseUrl: db.databaseUrl });
  const spec = (await (await server.fetch("/api/v1/openapi.json")).json()) as { paths: Record<string, Record<string, { summary: string }>> };
  operations = Object.entries(spec.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ method, path, summary: op.summary })));
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  db.cleanup();
});

beforeEach(async () => {
  context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
  problems = await watchPageProblems(context);
  asked = [];
  elsewhere = [];
  // Every request, redirects included (routing does not see a redirect's next hop)…
  context.on("request", (request) => {
    const url = new URL(request.url());
    if (url.origin === server.baseUrl) asked.push(url.pathname);
    else elsewhere.push(url.href);
  });
  // …and offline: only the server's own origin is reachable.
  await context.route("**/*", (route) => (new URL(route.request().url()).origin === server.baseUrl ? route.continue() : route.abort("internetdisconnected")));
});

afterEach(async () => {
  await context.close();
});

/** Opens the reference at its old address (redirected) and waits for the endpoint list. */
async function openReference(): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${server.baseUrl}/api/v1/docs`);
  expect(page.url()).toBe(`${server.baseUrl}/docs`);
  await page
    .getByText("/api/v1/chat/completions", { exact: true })
    .first()
    .waitFor({ state: "visible", ...WAIT });
  return page;
}

describe("the API reference in Chromium, offline", () => {
  test("every operation is listed, from the service's own files alone, with no CSP violation", async () => {
    const page = await openReference();
    expect(operations.length).toBeGreaterThan(10);
    for (const { method, path, summary } of operations) {
      const shown = page.getByText(summary, { exact: true });
      expect({ method, path, summary, shown: await shown.first().isVisible() }).toEqual({ method, path, summary, shown: true });
    }
    expect(await page.title()).toBe("Metered model proxy: API reference");
    // This release's version; and no "Authorize" (nor any operation's padlock): a read-only
    // reference has nothing to try a credential on.
    expect((await page.locator(".info .version").first().textContent())?.trim()).toBe(version);
    expect(await page.locator(".auth-wrapper, .btn.authorize, .authorization__btn").count()).toBe(0);
    expect(await page.getByText("/api/v1/grants/popup.js", { exact: true }).first().isVisible()).toBe(true);
    expect(elsewhere).toEqual([]);
    expect([...new Set(asked)].sort()).toEqual(PAGE_FILES);
    expect(problems.cspViolations).toEqual([]);
    expect(problems.console).toEqual([]);

    mkdirSync(ARTIFACTS, { recursive: true });
    const path = join(ARTIFACTS, "docs-page.png");
    const png = await page.screenshot({ path });
    expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    expect(await Bun.file(path).exists()).toBe(true);
  });

  test("the page runs sandboxed in an opaque origin, and its CSP refuses injected script", async () => {
    const page = await openReference();
    expect(await page.evaluate(() => window.origin)).toBe("null");
    // No storage of the service's origin is within reach.
    expect(
      await page.evaluate(() => {
        try {
          return `readable (${window.localStorage.length})`;
        } catch (err) {
          return (err as Error).name;
        }
      }),
    ).toBe("SecurityError");

    const violation = problems.nextCspViolation();
    const ran = await page.evaluate(() => {
      const script = document.createElement("script");
      script.textContent = "window.injectedRan = true";
      document.body.append(script);
      return window.injectedRan === true;
    });
    expect(ran).toBe(false);
    expect(await violation).toStartWith("script-src-elem inline @ " + server.baseUrl);
  });

  test("the offline guard is not vacuous: a request to another origin is refused and recorded", async () => {
    const page = await context.newPage();
    const url = "http://cdn.example.invalid/renderer.js";
    await expect(page.goto(url)).rejects.toThrow();
    expect(elsewhere).toEqual([url]);
  });
});
