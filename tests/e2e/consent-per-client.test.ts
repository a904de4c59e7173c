/**
 * Anonymous loads of an app's consent page cannot shut its real users out (issue 56): pages
 * count per client, behind a configured trusted proxy per forwarded address, and only
 * approvals count per app. Seven strangers loading the page past their own limits (140
 * loads, more than the 120 a minute an app once had in all) leave a real user's page and
 * approval untouched. Without TRUSTED_PROXY a forwarded address is not believed: a client
 * that changes its X-Forwarded-For at every load is still one client. Real server processes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { consentTokenIn } from "../helpers/consent";
import { cliCreateApp, startServer, tempDatabase, type RunningServer } from "../helpers/server";

const ORIGIN = "http://localhost:3000";
const db = tempDatabase();
let behindProxy: RunningServer;
let direct: RunningServer;
let appId: string;
beforeAll(async () => {
  appId = (await cliCreateApp(db.databaseUrl, "consent", [ORIGIN])).appId;
  // The test process is the proxy: it connects from 127.0.0.1 and says whom it forwards for.
  behindProxy = await startServer({ databaseUrl: db.databaseUrl, env: { TRUSTED_PROXY: "127.0.0.1" } });
  direct = await startServer({ databaseUrl: `sqlite:${db.dir}/direct/proxy.sqlite` });
});
afterAll(async () => {
  await behindProxy?.stop();
  await direct?.stop();
  db.cleanup();
});

const page = (server: RunningServer, forwardedFor: string, app = appId) =>
  server.fetch(`/api/v1/grants/consent?${new URLSearchParams({ appId: app, usd: "1", origin: ORIGIN })}`, {
    headers: { "x-forwarded-for": forwardedFor },
  });

describe("consent pages count per client", () => {
  test("behind a trusted proxy, seven strangers past their own limits leave a real user's page and approval alone", async () => {
    for (let stranger = 1; stranger <= 7; stranger++) {
      const statuses: number[] = [];
      for (let i = 0; i < 21; i++) statuses.push((await page(behindProxy, `198.51.100.${stranger}`)).status);
      // Each stranger's own limit (RL_CONSENT_IP_LIMIT, 20 a minute) stops it, and only it.
      expect(statuses).toEqual([...Array<number>(20).fill(200), 429]);
    }
    const mine = await page(behindProxy, "203.0.113.50");
    expect(mine.status).toBe(200);
    const approved = await behindProxy.fetch("/api/v1/grants/consent", {
      method: "POST",
      headers: { "content-type": "application/json", "sec-fetch-site": "same-origin", "x-forwarded-for": "203.0.113.50" },
      body: JSON.stringify({ consentToken: consentTokenIn(await mine.text()) }),
    });
    expect(approved.status).toBe(200);
    expect(((await approved.json()) as { grantToken: string }).grantToken).toMatch(/^gt_/);
  });

  test("without TRUSTED_PROXY, X-Forwarded-For is not believed: a new one at every load is still one client", async () => {
    const directApp = (await cliCreateApp(`sqlite:${db.dir}/direct/proxy.sqlite`, "direct", [ORIGIN])).appId;
    const statuses: number[] = [];
    for (let i = 1; i <= 21; i++) statuses.push((await page(direct, `198.51.100.${i}`, directApp)).status);
    expect(statuses).toEqual([...Array<number>(20).fill(200), 429]);
  });
});
