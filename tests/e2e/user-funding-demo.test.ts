/**
 * "Pay with my own account" in demo mode, as README "Quick start with the example app" runs
 * it: the bundle with no upstream key, whose in-process mock serves its PKCE page on the
 * service's own origin (/demo-upstream/auth), the example app, headless Chromium. The user
 * links an account and their call answers; linked again with a key whose limit cannot pay
 * for a call, the next call is FundingInvalidError (402 funding_invalid) and the
 * funding.invalid webhook is delivered; linked once more with a sound key, the calls answer.
 * tests/e2e/user-funding-browser.test.ts checks whose key paid, against an upstream it can read.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { Browser } from "playwright-core";
import { launchChromium, watchPageProblems } from "../helpers/browser";
import { pollUntil } from "../helpers/cluster";
import { ask, buildClientPackage, exampleOrigin, payWithOwnAccount, startExampleApp, type RunningExampleApp } from "../helpers/example-app";
import { runCli, runCliWithEnv, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { startReceiver, type ReceiverProcess } from "../helpers/webhook-receiver-process";

const WAIT = { timeout: 20_000 };
setDefaultTimeout(180_000);

const LOCAL_RECEIVERS = { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true" };
const db = tempDatabase();
let receiver: ReceiverProcess;
let proxy: RunningServer;
let example: RunningExampleApp;
let browser: Browser;
let app: { appId: string; secretKey: string };

beforeAll(async () => {
  buildClientPackage();
  receiver = await startReceiver();
  const { origin, port } = exampleOrigin();
  // README's quick start line, with the example's origin.
  const created = await runCli(db.databaseUrl, "app", "create", "--name", "Example", "--origin", origin, "--funding-sources", "app,user");
  expect(created.code).toBe(0);
  app = created.json[0] as { appId: string; secretKey: string };
  expect(created.json[0]).toMatchObject({ fundingSources: ["app", "user"] });
  const added = await runCliWithEnv({ ...LOCAL_RECEIVERS, DATABASE_URL: db.databaseUrl }, "webhook", "add", "--app", app.appId, "--url", receiver.url);
  expect(added.code).toBe(0);
  await receiver.control({ secret: added.json[0]!.secret as string });
  proxy = await startServer({ databaseUrl: db.databaseUrl, env: { WEBHOOK_POLL_MS: "50", ...LOCAL_RECEIVERS } });
  example = await startExampleApp(port, proxy.baseUrl, app);
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await example?.stop();
  await proxy?.stop();
  await receiver?.stop();
  db.cleanup();
});

describe("pay with my own account, in demo mode", () => {
  test("linked on the demo upstream's page; a key that cannot pay is funding_invalid with its webhook; linking again restores", async () => {
    const context = await browser.newContext();
    const problems = await watchPageProblems(context);
    const page = await context.newPage();
    await page.goto(`${example.origin}/`);
    await page.locator("#connection").filter({ hasText: "Not connected" }).waitFor(WAIT);

    await payWithOwnAccount(context, page);
    await page.locator("#connection").filter({ hasText: "paid by your own account" }).waitFor(WAIT);
    expect(await ask(page)).toEqual({ answered: true });

    // The user lowers the key's limit on the upstream's page below what one call may cost.
    await payWithOwnAccount(context, page, "0.000000001");
    expect(await ask(page)).toEqual({ error: "FundingInvalidError" });
    await pollUntil("the funding.invalid webhook", async () =>
      (await receiver.received()).find((r) => r.verified && r.status === 204 && r.event?.type === "funding.invalid" && r.event.data.userId === "demo-user"),
    );

    await payWithOwnAccount(context, page);
    expect(await ask(page)).toEqual({ answered: true });
    expect(problems.cspViolations).toEqual([]);
    await context.close();
  });
});
