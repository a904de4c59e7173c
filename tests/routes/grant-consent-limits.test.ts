/**
 * Issue 13's consent hardening through app.handle: consent pages rate-limited per client
 * address (an error page with 429 and Retry-After), and only approvals per app as well
 * (issue 56: anonymous loads must not use up what an app's real users need), the per-app daily ceiling on
 * what grants spend (approvals cost nothing; grant calls reserve against it like any cap),
 * and a page that says who pays. The fake clock moves windows and UTC days; nothing waits on real time.
 */
import { describe, expect, test } from "bun:test";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";
import { CONSENT_ORIGIN, consentTokenIn, obtainGrant, openConsentPage, postApproval } from "../helpers/consent";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

const consentRows = (t: ChatTestApp) => (t.db.query("SELECT count(*) AS n FROM consent_requests").get() as { n: number }).n;

/** An error page, not JSON, under the page's CSP, and with no token in it. */
async function expectErrorPage(res: Response, status: number, message: RegExp): Promise<void> {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toContain("text/html");
  expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
  const html = await res.text();
  expect(html).toContain("cannot be shown");
  expect(html).toMatch(message);
  expect(html).not.toContain("ct_");
}

describe("consent pages are rate-limited", () => {
  test("per client address: past the limit an error page with 429 and Retry-After, and no row; the window moves on", async () => {
    const t = await chatTestApp({ env: { RL_CONSENT_IP_LIMIT: "2", RL_CONSENT_WINDOW_SECONDS: "60" } });
    const other = await createAppWithKey(t.deps.store.apps, "other", [CONSENT_ORIGIN], t.clock.now());
    expect((await openConsentPage(t)).status).toBe(200);
    t.clock.advance(10_000);
    expect((await openConsentPage(t)).status).toBe(200);
    // The same address, another app: still this address's third page in the window.
    const limited = await openConsentPage({ app: t.app, appId: other.app.id });
    expect(limited.headers.get("retry-after")).toBe("50");
    expect(limited.headers.get("ratelimit-remaining")).toBe("0");
    await expectErrorPage(limited, 429, /Too many grant requests were opened from your network in the last 60 seconds\. Try again in 50 seconds\./);
    expect(consentRows(t)).toBe(2);
    // Bad parameters count too: the limit comes before any lookup.
    expect((await openConsentPage(t, { usd: "abc" })).status).toBe(429);

    t.clock.advance(50_000);
    expect((await openConsentPage(t)).status).toBe(200);
    expect(consentRows(t)).toBe(3);
  });

  test("not per app: loads past any per-app count all open, and draw nothing from the app's approvals; only approvals count per app", async () => {
    // Every request through app.handle is one client ("unknown"): its own limit set out of the way.
    const t = await chatTestApp({ env: { RL_CONSENT_IP_LIMIT: "1000", RL_GRANTS_IP_LIMIT: "1000", RL_GRANTS_APP_LIMIT: "2" } });
    const other = await createAppWithKey(t.deps.store.apps, "other", [CONSENT_ORIGIN], t.clock.now());
    // More than the 120 pages a minute an app once had in all: anonymous loads use nothing up.
    const pages: Response[] = [];
    for (let i = 0; i < 150; i++) pages.push(await openConsentPage(t));
    expect(pages.filter((p) => p.status !== 200).map((p) => p.status)).toEqual([]);
    expect(consentRows(t)).toBe(150);
    // The app's approvals are all still there; they alone draw on its per-app limit.
    const tokens = await Promise.all(pages.slice(0, 3).map(async (p) => consentTokenIn(await p.text())));
    expect((await postApproval(t, tokens[0]!)).status).toBe(200);
    expect((await postApproval(t, tokens[1]!)).status).toBe(200);
    const limited = await postApproval(t, tokens[2]!);
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe("rate_limited");
    expect(limited.headers.get("ratelimit-remaining")).toBe("0");
    // Another app's approvals are its own.
    expect((await obtainGrant({ app: t.app, appId: other.app.id })).grantToken).toMatch(/^gt_/);
  });
});

describe("the per-app daily ceiling on what grants spend", () => {
  const ask = () => ({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 20 });
  const withGrant = (token: string) => ({ "x-service-user": "", "x-service-grant": token });
  const spentTodayNano = (t: ChatTestApp) =>
    (t.db.query("SELECT COALESCE(SUM(cost_nano), 0) AS n FROM usage_ledger WHERE grant_id IS NOT NULL").get() as { n: number }).n;

  test("approvals cost nothing: twenty scripted approvals past the ceiling all succeed, and the ceiling is still there to spend", async () => {
    const t = await chatTestApp({ env: { GRANT_DAILY_CEILING_USD: "2", RL_GRANTS_IP_LIMIT: "100", RL_CONSENT_IP_LIMIT: "100" } });
    const grants: Array<{ grantToken: string }> = [];
    for (let i = 0; i < 20; i++) grants.push(await obtainGrant(t, { usd: "1" }));
    expect((await t.deps.store.grants.listForApp(t.appId, 100)).length).toBe(20);
    // A real user's grant among them spends as usual: nothing was used up by approving.
    const res = await t.chat(ask(), withGrant(grants[19]!.grantToken));
    expect(res.status).toBe(200);
  });

  test("past the day's spend, a grant call is 402 budget_exceeded with the ceiling's numbers, whatever its grant has left; the next UTC day it resets", async () => {
    const t = await chatTestApp({ env: { GRANT_DAILY_CEILING_USD: "0.0001" } });
    const first = await obtainGrant(t, { usd: "0.00008" });
    const second = await obtainGrant(t, { usd: "0.00008" });
    // The first grant spends to its own cap.
    let res: Response;
    do res = await t.chat(ask(), withGrant(first.grantToken));
    while (res.status === 200);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("grant_invalid");
    // The second then spends what the app's day has left, and is refused by the ceiling.
    do res = await t.chat(ask(), withGrant(second.grantToken));
    while (res.status === 200);
    await t.flush();
    expect(res.status).toBe(402);
    const { error } = (await res.json()) as { error: Record<string, any> };
    const spent = spentTodayNano(t);
    expect(error).toMatchObject({ code: "budget_exceeded", limitUsd: 0.0001, usedUsd: spent / 1e9, resetsAt: "2026-01-16T00:00:00.000Z" });
    expect(error.remainingUsd).toBeLessThan(0.0001 - 0.00008);
    expect(error.message).toContain("daily ceiling");
    expect(spent).toBeLessThanOrEqual(100_000);
    const view = (await (
      await t.app.handle(
        new Request("http://localhost/api/v1/grants/current", { headers: { authorization: `Bearer ${t.secretKey}`, ...withGrant(second.grantToken) } }),
      )
    ).json()) as { remainingUsd: number };
    expect(view.remainingUsd).toBeGreaterThan(0.00005);

    t.clock.set(Date.UTC(2026, 0, 16));
    expect((await t.chat(ask(), withGrant(second.grantToken))).status).toBe(200);
  });

  test("concurrent calls on several grants never spend past the ceiling together", async () => {
    const t = await chatTestApp({ env: { GRANT_DAILY_CEILING_USD: "0.0001", RL_CHAT_LIMIT: "1000" } });
    const grants: Array<{ grantToken: string }> = [];
    for (let i = 0; i < 4; i++) grants.push(await obtainGrant(t, { usd: "0.0001" }));
    const statuses = await Promise.all(Array.from({ length: 40 }, (_, i) => t.chat(ask(), withGrant(grants[i % 4]!.grantToken)).then((r) => r.status)));
    await t.flush();
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0);
    expect(statuses.filter((s) => s !== 200 && s !== 402)).toEqual([]);
    expect(spentTodayNano(t)).toBeLessThanOrEqual(100_000);
  });

  test("a grant larger than the whole ceiling is refused for what it is", async () => {
    const t = await chatTestApp();
    await t.deps.store.apps.update(t.appId, { grantDailyCeilingNano: 500_000_000 });
    await expectErrorPage(
      await openConsentPage(t, { usd: "1" }),
      402,
      /Grants of chat-test may spend at most \$0\.50 a day, and this \$1\.00 grant is larger than that/,
    );
  });
});

describe("the consent page says who pays", () => {
  test("the app pays, up to the amount, over the uses, until the expiry; the user is not charged; nothing autofocuses Approve", async () => {
    const t = await chatTestApp();
    const html = await (await openConsentPage(t, { usd: "0.5", maxUses: "3", ttl: "3600" })).text();
    const whoPays = /<p id="who-pays">([\s\S]*?)<\/p>/
      .exec(html)![1]!
      .replace(/<[^>]+>/g, "")
      .replace(/\s+/g, " ");
    expect(whoPays).toBe(
      "chat-test pays for the AI model requests this grant allows: up to $0.50 over at most 3 requests, until Thu, 15 Jan 2026 13:00:00 GMT. " +
        "You are not charged. Approving only lets chat-test spend up to this amount on AI requests made for you.",
    );
    expect(html).toContain('<dt>Paid by</dt><dd id="payer">chat-test, not you</dd>');
    expect(html).not.toContain("autofocus");
    // Deny comes first in the document, so it is the first Tab stop.
    expect(html.indexOf('id="deny"')).toBeLessThan(html.indexOf('id="approve"'));
  });
});
