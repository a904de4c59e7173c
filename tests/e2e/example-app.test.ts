/**
 * The example app (examples/chat-app), end to end as README "Quick start with the example
 * app" runs it: a real proxy process in demo mode at its default stream pace, the example's
 * own server process, and headless Chromium on the example's page. The page loads and
 * works without a console error or a failed request; the answer streams in visibly; what a
 * cheap call costs shows as more than $0; the connect page's cap takes what the service
 * takes and says why it refuses the rest; a used-up budget shows as BudgetExceededError;
 * and without its two required settings the example says what to set.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { statSync } from "node:fs";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { launchChromium, watchPageProblems } from "../helpers/browser";
import { buildClientPackage, exampleOrigin as pickExampleOrigin, startExampleApp, type RunningExampleApp } from "../helpers/example-app";
import { cliCreateApp, freePort, REPO_ROOT, startServer, tempDatabase, type RunningServer } from "../helpers/server";

interface Element {
  dataset: Record<string, string | undefined>;
  textContent: string | null;
  removeAttribute(name: string): void;
}
declare const document: { getElementById(id: string): Element | null };
declare const window: { answerStates: string[] };
declare class MutationObserver {
  constructor(callback: () => void);
  observe(target: Element, options: Record<string, boolean>): void;
}

const WAIT = { timeout: 20_000 };
setDefaultTimeout(120_000);

const db = tempDatabase();
let proxy: RunningServer;
let example: RunningExampleApp;
let exampleOrigin: string;
let browser: Browser;
let secretKey: string;

beforeAll(async () => {
  buildClientPackage();
  // The harness turns demo mode's pacing off; empty is unset: the default pace, as `npm start` has it.
  proxy = await startServer({ databaseUrl: db.databaseUrl, env: { DEMO_STREAM_TOKENS_PER_SECOND: "" } });
  const { origin, port } = pickExampleOrigin();
  exampleOrigin = origin;
  const app = await cliCreateApp(db.databaseUrl, "Example app", [exampleOrigin]);
  secretKey = app.secretKey;
  example = await startExampleApp(port, `http://localhost:${proxy.port}`, app);
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await example?.stop();
  await proxy?.stop();
  db.cleanup();
});

const dataOf = (page: Page, id: string, key: string) =>
  page.evaluate(([i, k]) => document.getElementById(i as string)?.dataset[k as string] ?? null, [id, key] as const);

const connected = (page: Page, yes: boolean) =>
  page.waitForFunction((want) => document.getElementById("connection")?.dataset.connected === String(want), yes, WAIT);

/** Every response with an error status and every request that failed, in all of the context's pages. */
function watchFailedRequests(context: BrowserContext): string[] {
  const failed: string[] = [];
  context.on("response", (response) => {
    if (response.status() >= 400) failed.push(`${response.status()} ${response.url()}`);
  });
  context.on("requestfailed", (request) => failed.push(`${request.failure()?.errorText ?? "failed"} ${request.url()}`));
  return failed;
}

/** Opens the hosted connect page from the example's button; resolves once the page has the session. */
async function openConnect(page: Page): Promise<Page> {
  const [popup] = await Promise.all([page.waitForEvent("popup", WAIT), page.click("#connect")]);
  await popup.waitForSelector("#cap:enabled", WAIT);
  return popup;
}

/** The user's budget as the proxy tells the app's backend. */
async function status(): Promise<{ connected: boolean; limits: { monthlyUsd: number }; usage: { monthlyUsd: number } }> {
  const response = await proxy.fetch("/api/v1/status?appUserId=demo-user", { headers: { authorization: `Bearer ${secretKey}` } });
  expect(response.status).toBe(200);
  return (await response.json()) as { connected: boolean; limits: { monthlyUsd: number }; usage: { monthlyUsd: number } };
}

describe("the example app in Chromium", () => {
  test("no console error or failed request; a paced answer streams in pieces; one call's cost shows", async () => {
    const context = await browser.newContext();
    const problems = await watchPageProblems(context);
    const failed = watchFailedRequests(context);
    const page = await context.newPage();
    await page.goto(`${exampleOrigin}/`);
    await page.locator("#connection").filter({ hasText: "Not connected" }).waitFor(WAIT);

    const popup = await openConnect(page);
    expect(await popup.inputValue("#cap")).toBe("5");
    await popup.click("#approve");
    await connected(page, true);
    expect(await page.locator("#connection").textContent()).toBe("Connected: $0 of $5 used this month");

    // Every text the answer shows on its way, in order (the page appends each piece it reads).
    await page.evaluate(() => {
      const answer = document.getElementById("answer")!;
      window.answerStates = [];
      new MutationObserver(() => window.answerStates.push(answer.textContent ?? "")).observe(answer, { childList: true, characterData: true, subtree: true });
    });
    await page.click("#ask");
    await page.waitForFunction(() => document.getElementById("answer")?.dataset.done === "true", undefined, WAIT);
    const answer = (await page.locator("#answer").textContent())!;
    const states = (await page.evaluate(() => window.answerStates)).filter((text) => text !== "");
    // Each state grows the one before it, and the last is the whole answer: the pieces came in
    // order. Many of them: the answer streamed in over many reads, not in one at the end.
    states.forEach((text, i) => expect(text.startsWith(states[i - 1] ?? "")).toBe(true));
    expect(states.at(-1)).toBe(answer);
    expect(new Set(states).size).toBeGreaterThanOrEqual(4);

    // The call cost a few millionths of a dollar: shown (to 6 significant digits), not rounded to $0.
    await page.waitForFunction(() => !/ \$0 of/.test(document.getElementById("connection")?.textContent ?? ""), undefined, WAIT);
    const shown = /^Connected: \$([\d.,]+) of \$5 used this month$/.exec((await page.locator("#connection").textContent())!);
    expect(shown).not.toBeNull();
    const usedUsd = (await status()).usage.monthlyUsd;
    expect(usedUsd).toBeGreaterThan(0);
    expect(Number(shown![1]!.replace(/,/g, ""))).toBe(Number(usedUsd.toPrecision(6)));

    expect(problems.console).toEqual([]);
    expect(failed).toEqual([]);
    expect(problems.cspViolations).toEqual([]);
    await context.close();
  });

  test("the connect page's cap takes the service's bounds, and says why it refuses the rest", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${exampleOrigin}/`);
    await connected(page, true);
    const popup = await openConnect(page);
    // One nano-dollar, the smallest amount the service counts, up to the $5 the app asks for.
    const cap = popup.locator("#cap");
    expect({ min: await cap.getAttribute("min"), step: await cap.getAttribute("step"), max: await cap.getAttribute("max") }).toEqual({
      min: "0.000000001",
      step: "any",
      max: "5",
    });
    const refused = async (value: string, why: string) => {
      await popup.fill("#cap", value);
      await popup.click("#approve");
      await popup.locator("#status").filter({ hasText: why }).waitFor(WAIT);
      expect(await popup.isEnabled("#approve")).toBe(true);
      expect((await status()).limits.monthlyUsd).toBe(5);
    };
    await refused("0.0000000009", "Enter a monthly cap above $0 (at least $0.000000001)");
    await refused("0", "Enter a monthly cap above $0");
    await refused("5.01", "The monthly cap may not exceed the limit the app requested ($5)");
    // Past the page's own check, the service's refusal (400) is shown as it words it.
    await popup.evaluate(() => document.getElementById("cap")!.removeAttribute("max"));
    await refused("5.01", "Not approved: monthlyUsd may not exceed the limit the app requested (5)");

    // The smallest cap is taken (the popup closes once the example has heard it).
    await popup.fill("#cap", "0.000000001");
    await popup.click("#approve");
    await page.waitForFunction(() => document.getElementById("connect")?.dataset.outcome === "connected", undefined, WAIT);
    expect((await status()).limits.monthlyUsd).toBe(0.000000001);
    await page.click("#revoke");
    await connected(page, false);
    await context.close();
  });

  test("connect on the hosted page, a streamed answer, a 402 as BudgetExceededError, revoke", async () => {
    const context = await browser.newContext();
    const problems = await watchPageProblems(context);
    const page = await context.newPage();
    await page.goto(`${exampleOrigin}/`);
    await page.locator("#connection").filter({ hasText: "Not connected" }).waitFor(WAIT);

    const popup = await openConnect(page);
    expect(await popup.inputValue("#cap")).toBe("5");
    // The user sets a tiny budget, so that a few calls use it up.
    await popup.fill("#cap", "0.00005");
    await popup.click("#approve");
    await connected(page, true);
    expect(await dataOf(page, "connect", "outcome")).toBe("connected");

    let refusal: string | null = null;
    for (let i = 0; i < 40 && refusal === null; i++) {
      // The last answer's flag goes first, so that the wait below is for this call's outcome.
      await page.evaluate(() => {
        const answer = document.getElementById("answer");
        if (answer) delete answer.dataset.done;
      });
      await page.click("#ask");
      await page.waitForFunction(
        () => document.getElementById("answer")?.dataset.done === "true" || document.getElementById("error")?.dataset.name,
        undefined,
        WAIT,
      );
      refusal = await dataOf(page, "error", "name");
      if (i === 0) expect((await page.locator("#answer").textContent())!.length).toBeGreaterThan(0);
    }
    expect(refusal).toBe("BudgetExceededError");
    expect(await page.locator("#error").textContent()).toContain("resets");

    await page.click("#revoke");
    await connected(page, false);
    expect((await status()).connected).toBe(false);
    expect(problems.cspViolations).toEqual([]);
    await context.close();
  });
});

describe("the example app at another origin than its own", () => {
  test("opened at localhost instead of its registered 127.0.0.1, the page says which address to open, instead of waiting", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const localhost = exampleOrigin.replace("127.0.0.1", "localhost");
    await page.goto(`${localhost}/`);
    await page.waitForFunction(() => document.getElementById("connection")?.dataset.connected === "unknown", undefined, WAIT);
    expect(await page.locator("#connection").textContent()).toBe(
      `Open this page at ${exampleOrigin}: that is the origin the app registered (app create --origin), and the proxy answers no other. This page is at ${localhost}.`,
    );
    await context.close();
  });
});

/** `npm run example` (the README's command) with `env`; its output as it comes, and the process. */
function npmRunExample(env: Record<string, string>) {
  return Bun.spawn(["npm", "run", "example"], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
}

describe("the example app's settings", () => {
  test("npm run example without APP_ID says what to set before it builds anything, and exits 2", async () => {
    const built = join(REPO_ROOT, "packages/client/dist/server.js");
    const before = statSync(built).mtimeMs;
    const run = npmRunExample({ PORT: String(freePort()), SECRET_KEY: "sk_live_x_y" });
    const [code, stderr] = await Promise.all([run.exited, new Response(run.stderr).text()]);
    expect(code).toBe(2);
    expect(stderr).toContain("APP_ID must be set: the appId and secretKey that `npm run cli -- app create` printed");
    // tsc rewrites every output it builds: the library was not built.
    expect(statSync(built).mtimeMs).toBe(before);
  });

  test("npm run example stops its server on SIGTERM", async () => {
    const port = freePort();
    const run = npmRunExample({ PORT: String(port), PROXY_URL: `http://localhost:${proxy.port}`, APP_ID: "appexample", SECRET_KEY: secretKey });
    const reader = run.stdout.getReader();
    let said = "";
    while (!said.includes("example app on")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`npm run example ended: ${said}`);
      said += new TextDecoder().decode(value);
    }
    expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(200);
    run.kill("SIGTERM");
    await run.exited;
    // Nothing answers there any more: the server went with npm, not left behind.
    expect(
      await fetch(`http://127.0.0.1:${port}/`).then(
        (r) => `answered ${r.status}`,
        () => "refused",
      ),
    ).toBe("refused");
  });

  test("without APP_ID and SECRET_KEY it says what to set, and exits 2", async () => {
    const run = Bun.spawn([process.execPath, "examples/chat-app/server.ts"], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? "", PORT: String(freePort()) },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const [code, stderr] = await Promise.all([run.exited, new Response(run.stderr).text()]);
    expect(code).toBe(2);
    expect(stderr.trim()).toBe(
      'APP_ID and SECRET_KEY must be set: the appId and secretKey that `npm run cli -- app create` printed (README "Quick start with the example app")',
    );
  });
});
