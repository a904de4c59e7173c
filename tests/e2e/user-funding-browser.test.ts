/**
 * Issue 34's "done when", in headless Chromium: the example app connects a user with "Pay with
 * my own account" through the upstream's PKCE page (the project's mock, Approve); that user's
 * calls are billed to their own key and the operator's key does not move; once their credit
 * is gone the next call answers 402 funding_invalid (FundingInvalidError on the page), the
 * funding.invalid webhook is delivered, and a later call is refused without reaching the
 * upstream; connecting again the same way restores service. An operator key out of credit
 * then answers 502 to an app-funded user and marks no one, while the user-funded user goes on.
 *
 * The service runs from the bundle with the mock as a separate upstream on its own origin,
 * fronted here so that the test can (1) read the mock's key books, (2) learn the key each
 * approval created (the service never shows it), and (3) serve the PKCE page with
 * Cross-Origin-Opener-Policy: same-origin, as a real upstream's login page may: the connect
 * page must finish although that severs the opener of the window the upstream page is in.
 * tests/e2e/user-funding-demo.test.ts runs the flow in demo mode, on the demo upstream's page.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { createMockUpstream } from "../../packages/mock-upstream/src";
import { launchChromium, watchPageProblems } from "../helpers/browser";
import { pollUntil } from "../helpers/cluster";
import { ask, buildClientPackage, exampleOrigin, payWithOwnAccount, startExampleApp, type RunningExampleApp } from "../helpers/example-app";
import { connectOverHttp, runCli, runCliWithEnv, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { startReceiver, type ReceiverProcess } from "../helpers/webhook-receiver-process";

const WAIT = { timeout: 20_000 };
setDefaultTimeout(180_000);

const OPERATOR_KEY = "sk-or-operator-key-for-user-funding-e2e";
const LOCAL_RECEIVERS = { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true" };
const db = tempDatabase();
const mock = createMockUpstream();
/** The user keys the mock issued, in order: read off POST /auth/keys on its way to the service. */
const issuedKeys: string[] = [];
let upstream: ReturnType<typeof Bun.serve>;
let receiver: ReceiverProcess;
let proxy: RunningServer;
let example: RunningExampleApp;
let browser: Browser;
let app: { appId: string; secretKey: string };

/** The mock, served on its own origin; its PKCE page with COOP same-origin. */
function serveUpstream(): ReturnType<typeof Bun.serve> {
  return Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(request) {
      const { pathname } = new URL(request.url);
      const answer = await mock.fetch(request);
      if (pathname === "/auth") {
        const headers = new Headers(answer.headers);
        headers.set("cross-origin-opener-policy", "same-origin");
        return new Response(answer.body, { status: answer.status, headers });
      }
      if (pathname === "/api/v1/auth/keys" && answer.status === 200) issuedKeys.push(((await answer.clone().json()) as { key: string }).key);
      return answer;
    },
  });
}

beforeAll(async () => {
  buildClientPackage();
  upstream = serveUpstream();
  receiver = await startReceiver();
  const { origin, port } = exampleOrigin();
  const created = await runCli(db.databaseUrl, "app", "create", "--name", "Own funding", "--origin", origin, "--funding-sources", "app,user");
  expect(created.code).toBe(0);
  app = created.json[0] as { appId: string; secretKey: string };
  const added = await runCliWithEnv({ ...LOCAL_RECEIVERS, DATABASE_URL: db.databaseUrl }, "webhook", "add", "--app", app.appId, "--url", receiver.url);
  expect(added.code).toBe(0);
  await receiver.control({ secret: added.json[0]!.secret as string });
  const upstreamOrigin = `http://127.0.0.1:${upstream.port}`;
  proxy = await startServer({
    databaseUrl: db.databaseUrl,
    env: {
      UPSTREAM_BASE_URL: `${upstreamOrigin}/api/v1`,
      UPSTREAM_API_KEY: OPERATOR_KEY,
      UPSTREAM_AUTH_URL: `${upstreamOrigin}/auth`,
      WEBHOOK_POLL_MS: "50",
      ...LOCAL_RECEIVERS,
    },
  });
  // The address startServer gives as PUBLIC_URL: the connect page and the callback share that origin.
  example = await startExampleApp(port, proxy.baseUrl, app);
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await example?.stop();
  await proxy?.stop();
  await receiver?.stop();
  await upstream?.stop(true);
  db.cleanup();
});

const operatorUsage = () => mock.keys.get(OPERATOR_KEY)?.usage.total ?? 0;

/** "Pay with my own account", Approve on the upstream's page; the key the mock issued for it. */
async function linkOwnAccount(context: BrowserContext, page: Page): Promise<string> {
  const keysBefore = issuedKeys.length;
  await payWithOwnAccount(context, page);
  expect(issuedKeys.length).toBe(keysBefore + 1);
  return issuedKeys.at(-1)!;
}

/** A chat call the app's backend makes for `user`, straight to the proxy. */
async function chatFor(user: string): Promise<{ status: number; code: string | null }> {
  const response = await proxy.fetch("/api/v1/chat/completions", {
    method: "POST",
    headers: { authorization: `Bearer ${app.secretKey}`, "x-service-user": user, "content-type": "application/json" },
    body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "Say hello" }] }),
  });
  const body = (await response.json()) as { error?: { code: string } };
  return { status: response.status, code: body.error?.code ?? null };
}

async function fundingSourceOf(user: string): Promise<string> {
  const response = await proxy.fetch(`/api/v1/status?appUserId=${user}`, { headers: { authorization: `Bearer ${app.secretKey}` } });
  expect(response.status).toBe(200);
  return ((await response.json()) as { fundingSource: string }).fundingSource;
}

describe("a user pays with their own upstream account, in Chromium", () => {
  test("billed to their key, funding_invalid and its webhook when it runs dry, a reconnect restores; an operator out of credit marks no one", async () => {
    const context = await browser.newContext();
    const problems = await watchPageProblems(context);
    const page = await context.newPage();
    await page.goto(`${example.origin}/`);
    await page.locator("#connection").filter({ hasText: "Not connected" }).waitFor(WAIT);

    const firstKey = await linkOwnAccount(context, page);
    await page.locator("#connection").filter({ hasText: "paid by your own account" }).waitFor(WAIT);
    expect(await fundingSourceOf("demo-user")).toBe("user");

    // Billed to the user's key; the operator's books do not move.
    const operatorBefore = operatorUsage();
    expect(await ask(page)).toEqual({ answered: true });
    expect(mock.keys.get(firstKey)!.usage.total).toBeGreaterThan(0);
    expect(operatorUsage()).toBe(operatorBefore);

    // The user's credit runs out upstream: 402 funding_invalid, the webhook, and the next call
    // refused at once, without reaching the upstream.
    const account = mock.keys.get(firstKey)!;
    account.limitUsd = account.usage.total;
    expect(await ask(page)).toEqual({ error: "FundingInvalidError" });
    const delivered = await pollUntil("the funding.invalid webhook", async () =>
      (await receiver.received()).find((r) => r.verified && r.status === 204 && r.event?.type === "funding.invalid" && r.event.data.userId === "demo-user"),
    );
    expect(delivered.event!.data.appId).toBe(app.appId);
    const served = mock.served.length;
    expect(await ask(page)).toEqual({ error: "FundingInvalidError" });
    expect(mock.served.length).toBe(served);

    // Reconnecting, the same flow again, restores service on a new key.
    const secondKey = await linkOwnAccount(context, page);
    expect(secondKey).not.toBe(firstKey);
    expect(await ask(page)).toEqual({ answered: true });
    expect(mock.keys.get(secondKey)!.usage.total).toBeGreaterThan(0);
    expect(operatorUsage()).toBe(operatorBefore);

    // The operator's key runs out: an app-funded user gets 502 upstream and is not marked;
    // the user-funded user goes on.
    await connectOverHttp(proxy, app.secretKey, "bob", 5);
    expect(await chatFor("bob")).toEqual({ status: 200, code: null });
    const operator = mock.keys.get(OPERATOR_KEY)!;
    operator.limitUsd = operator.usage.total;
    expect(await chatFor("bob")).toEqual({ status: 502, code: "upstream" });
    expect(await ask(page)).toEqual({ answered: true });
    operator.limitUsd = null;
    expect(await chatFor("bob")).toEqual({ status: 200, code: null });
    expect(await fundingSourceOf("bob")).toBe("app");
    expect((await receiver.received()).filter((r) => r.event?.type === "funding.invalid" && r.event.data.userId === "bob")).toEqual([]);

    expect(problems.cspViolations).toEqual([]);
    await context.close();
  });
});
