/**
 * The example app (examples/chat-app) as README "Quick start with the example app" runs it:
 * its own server process, for the browser tests that drive its page, and the steps those
 * tests take on its page.
 */
import { expect } from "bun:test";
import type { Subprocess } from "bun";
import type { BrowserContext, Page } from "playwright-core";
import { freePort, REPO_ROOT } from "./server";

export interface RunningExampleApp {
  /** e.g. http://127.0.0.1:41234: the origin to register for the app. */
  origin: string;
  stop(): Promise<void>;
}

/** The example's origin, chosen before the app is created (the app must register it). */
export function exampleOrigin(): { origin: string; port: number } {
  const port = freePort();
  return { origin: `http://127.0.0.1:${port}`, port };
}

/** Builds packages/client (the example imports its dist), as `npm run example` does. */
export function buildClientPackage(): void {
  const build = Bun.spawnSync([process.execPath, "x", "tsc", "-p", "packages/client"], { cwd: REPO_ROOT });
  if (build.exitCode !== 0) throw new Error(`building packages/client failed: ${build.stdout}${build.stderr}`);
}

/** Starts the example's server on `port`, talking to the proxy at `proxyUrl`; resolves once it listens. */
export async function startExampleApp(port: number, proxyUrl: string, app: { appId: string; secretKey: string }): Promise<RunningExampleApp> {
  const proc: Subprocess<"ignore", "pipe", "inherit"> = Bun.spawn([process.execPath, "examples/chat-app/server.ts"], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", PORT: String(port), PROXY_URL: proxyUrl, APP_ID: app.appId, SECRET_KEY: app.secretKey },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "inherit",
  });
  const reader = proc.stdout.getReader();
  let said = "";
  while (!said.includes("example app on")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the example app exited: ${said}`);
    said += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return {
    origin: `http://127.0.0.1:${port}`,
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
}

interface Element {
  dataset: Record<string, string | undefined>;
}
declare const document: { getElementById(id: string): Element | null };

const WAIT = { timeout: 20_000 };

const dataOf = (page: Page, id: string, key: string) =>
  page.evaluate(([i, k]) => document.getElementById(i as string)?.dataset[k as string] ?? null, [id, key] as const);

/**
 * The example's "Pay with my own account": the connect page (the user's account preselected),
 * Approve there, then the upstream's PKCE page in the window it opens, where the key's limit
 * is the approved cap ($5, the example's) unless `limit` changes it, and Approve. Resolves once
 * `connect()` has resolved in the example's page with fundingSource "user" and both windows
 * have closed.
 */
export async function payWithOwnAccount(context: BrowserContext, page: Page, limit?: string): Promise<void> {
  await page.evaluate(() => delete document.getElementById("connect-own")!.dataset.outcome);
  const [popup] = await Promise.all([page.waitForEvent("popup", WAIT), page.click("#connect-own")]);
  await popup.waitForSelector("#cap:enabled", WAIT);
  expect(await popup.isChecked('input[name="funding"][value="user"]')).toBe(true);
  const [upstreamPage] = await Promise.all([context.waitForEvent("page", WAIT), popup.click("#approve")]);
  await upstreamPage.waitForURL(/\/auth\?/, WAIT);
  // The key's limit is the approved cap, reset monthly: the upstream holds the cap a second time.
  expect(await upstreamPage.inputValue('input[name="limit"]')).toBe("5");
  if (limit !== undefined) await upstreamPage.fill('input[name="limit"]', limit);
  // Both windows close by themselves once their answer was heard: the callback's, told by the
  // connect page; the connect page, told by the library.
  const closed = Promise.all([upstreamPage.waitForEvent("close", WAIT), popup.waitForEvent("close", WAIT)]);
  await upstreamPage.click('button[value="approve"]');
  await page.waitForFunction(() => document.getElementById("connect-own")?.dataset.outcome === "connected", undefined, WAIT);
  expect(await dataOf(page, "connect-own", "fundingSource")).toBe("user");
  await closed;
}

/** The example's "Ask"; resolves with the answer's arrival, or the error class the page shows. */
export async function ask(page: Page): Promise<{ answered: true } | { error: string }> {
  await page.evaluate(() => {
    delete document.getElementById("answer")!.dataset.done;
    delete document.getElementById("error")!.dataset.name;
  });
  await page.click("#ask");
  await page.waitForFunction(
    () => document.getElementById("answer")?.dataset.done === "true" || document.getElementById("error")?.dataset.name !== undefined,
    undefined,
    WAIT,
  );
  const error = await dataOf(page, "error", "name");
  return error === null ? { answered: true } : { error };
}
