/**
 * The example app (examples/chat-app), end to end as README "Quick start with the example
 * app" runs it: a real proxy process in demo mode, the example's own server process, and
 * headless Chromium on the example's page. The user sets a budget on the hosted connect
 * page (lowered to a few cents' hundredths so it runs out), gets a streamed answer, then a
 * 402 the page shows as BudgetExceededError, and revokes.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { Browser, Page } from "playwright-core";
import type { Subprocess } from "bun";
import { launchChromium, watchPageProblems } from "../helpers/browser";
import { cliCreateApp, freePort, REPO_ROOT, startServer, tempDatabase, type RunningServer } from "../helpers/server";

declare const document: { getElementById(id: string): { dataset: Record<string, string | undefined> } | null };

const WAIT = { timeout: 20_000 };
setDefaultTimeout(120_000);

const db = tempDatabase();
let proxy: RunningServer;
let example: Subprocess<"ignore", "pipe", "inherit">;
let exampleOrigin: string;
let browser: Browser;
let secretKey: string;

beforeAll(async () => {
  const build = Bun.spawnSync([process.execPath, "x", "tsc", "-p", "packages/client"], { cwd: REPO_ROOT });
  if (build.exitCode !== 0) throw new Error(`building packages/client failed: ${build.stdout}${build.stderr}`);
  proxy = await startServer({ databaseUrl: db.databaseUrl });
  const port = freePort();
  exampleOrigin = `http://127.0.0.1:${port}`;
  const app = await cliCreateApp(db.databaseUrl, "Example app", [exampleOrigin]);
  secretKey = app.secretKey;
  example = Bun.spawn([process.execPath, "examples/chat-app/server.ts"], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", PORT: String(port), PROXY_URL: `http://localhost:${proxy.port}`, APP_ID: app.appId, SECRET_KEY: app.secretKey },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "inherit",
  });
  const reader = example.stdout.getReader();
  let said = "";
  while (!said.includes("example app on")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the example app exited: ${said}`);
    said += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  example?.kill("SIGTERM");
  await example?.exited;
  await proxy?.stop();
  db.cleanup();
});

const dataOf = (page: Page, id: string, key: string) =>
  page.evaluate(([i, k]) => document.getElementById(i as string)?.dataset[k as string] ?? null, [id, key] as const);

describe("the example app in Chromium", () => {
  test("connect on the hosted page, a streamed answer, a 402 as BudgetExceededError, revoke", async () => {
    const context = await browser.newContext();
    const problems = await watchPageProblems(context);
    const page = await context.newPage();
    await page.goto(`${exampleOrigin}/`);
    await page.locator("#connection").filter({ hasText: "Not connected" }).waitFor(WAIT);

    const [popup] = await Promise.all([page.waitForEvent("popup", WAIT), page.click("#connect")]);
    await popup.locator("#current").filter({ hasText: "Not connected" }).waitFor(WAIT);
    expect(await popup.inputValue("#cap")).toBe("5");
    // The user sets a tiny budget, so that a few calls use it up.
    await popup.fill("#cap", "0.0001");
    await popup.click("#approve");
    // (Not by its text: Playwright's hasText is a case-insensitive substring, and "Not connected" holds "connected".)
    await page.waitForFunction(() => document.getElementById("connection")?.dataset.connected === "true", undefined, WAIT);
    expect(await dataOf(page, "connect", "outcome")).toBe("connected");

    await page.click("#ask");
    await page.waitForFunction(() => document.getElementById("answer")?.dataset.done === "true", undefined, WAIT);
    expect((await page.locator("#answer").textContent())!.length).toBeGreaterThan(0);

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
    }
    expect(refusal).toBe("BudgetExceededError");
    expect(await page.locator("#error").textContent()).toContain("resets");

    await page.click("#revoke");
    await page.waitForFunction(() => document.getElementById("connection")?.dataset.connected === "false", undefined, WAIT);
    const status = await proxy.fetch("/api/v1/status?appUserId=demo-user", { headers: { authorization: `Bearer ${secretKey}` } });
    expect(status.status).toBe(200);
    expect(((await status.json()) as { connected: boolean }).connected).toBe(false);
    expect(problems.cspViolations).toEqual([]);
    await context.close();
  });
});
