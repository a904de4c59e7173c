/**
 * Issue 13's consent hardening through app.handle: consent pages rate-limited per client
 * address and per app (an error page with 429 and Retry-After), the per-app daily ceiling on
 * grant dollars (refused when the page opens and, atomically, at approval), and a page that
 * says who pays. The fake clock moves windows and UTC days; nothing waits on real time.
 */
import { describe, expect, test } from "bun:test";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";
import { CONSENT_ORIGIN, consentTokenIn, obtainGrant, openConsentPage, postApproval } from "../helpers/consent";

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
    const t = await chatTestApp({ env: { RL_CONSENT_IP_LIMIT: "2", RL_CONSENT_APP_LIMIT: "100", RL_CONSENT_WINDOW_SECONDS: "60" } });
    const other = await t.deps.store.apps.create("other", [CONSENT_ORIGIN], t.clock.now());
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

  test("per app: one app past its limit leaves other apps' pages alone", async () => {
    const t = await chatTestApp({ env: { RL_CONSENT_IP_LIMIT: "100", RL_CONSENT_APP_LIMIT: "2" } });
    const other = await t.deps.store.apps.create("other", [CONSENT_ORIGIN], t.clock.now());
    expect((await openConsentPage(t)).status).toBe(200);
    expect((await openConsentPage(t)).status).toBe(200);
    const limited = await openConsentPage(t);
    expect(limited.headers.get("retry-after")).toBe("60");
    await expectErrorPage(limited, 429, /opened for this app in the last 60 seconds/);
    expect((await openConsentPage({ app: t.app, appId: other.app.id })).status).toBe(200);
    expect(consentRows(t)).toBe(3);
  });
});

describe("the per-app daily ceiling on grant dollars", () => {
  test("approval past the ceiling is 402 budget_exceeded with the numbers; the page opens refused; the next UTC day it resets", async () => {
    const t = await chatTestApp({ env: { GRANT_DAILY_CEILING_USD: "2" } });
    // Three pages opened before any approval: each fits on its own.
    const tokens: string[] = [];
    for (let i = 0; i < 3; i++) tokens.push(consentTokenIn(await (await openConsentPage(t)).text()));
    expect((await postApproval(t, tokens[0]!)).status).toBe(200);
    expect((await postApproval(t, tokens[1]!)).status).toBe(200);
    const refused = await postApproval(t, tokens[2]!);
    expect(refused.status).toBe(402);
    const { error } = (await refused.json()) as { error: Record<string, unknown> };
    expect(error).toEqual({
      code: "budget_exceeded",
      message:
        "chat-test has reached its daily limit for grants: $2.00 of its $2.00 a day is already approved, so this $1.00 grant cannot be approved until 2026-01-16 00:00 UTC. Nothing was granted.",
      limitUsd: 2,
      usedUsd: 2,
      remainingUsd: 0,
      resetsAt: "2026-01-16T00:00:00.000Z",
    });
    expect((await t.deps.store.grants.listForApp(t.appId, 10)).length).toBe(2);

    // Now the page itself says so, and records nothing, up to the last millisecond of the day.
    const rows = consentRows(t);
    t.clock.set(Date.UTC(2026, 0, 16) - 1);
    await expectErrorPage(await openConsentPage(t, { usd: "0.01" }), 402, /chat-test has reached its daily limit for grants: \$2\.00 of its \$2\.00/);
    expect(consentRows(t)).toBe(rows);

    t.clock.set(Date.UTC(2026, 0, 16));
    await obtainGrant(t, { usd: "2" });
  });

  test("a refused approval leaves its consent token usable: the app's own ceiling, once raised, lets it through", async () => {
    const t = await chatTestApp({ env: { GRANT_DAILY_CEILING_USD: "100" } });
    await t.deps.store.apps.update(t.appId, { grantDailyCeilingNano: 1_500_000_000 });
    await obtainGrant(t);
    const token = consentTokenIn(await (await openConsentPage(t, { usd: "0.5" })).text());
    await obtainGrant(t, { usd: "0.5" }); // the day is now full: $1.50
    expect((await postApproval(t, token)).status).toBe(402);
    await t.deps.store.apps.update(t.appId, { grantDailyCeilingNano: 2_000_000_000 });
    expect((await postApproval(t, token)).status).toBe(200);
  });

  test("a grant larger than the whole ceiling is refused for what it is, not for today", async () => {
    const t = await chatTestApp();
    await t.deps.store.apps.update(t.appId, { grantDailyCeilingNano: 500_000_000 });
    await expectErrorPage(
      await openConsentPage(t, { usd: "1" }),
      402,
      /may have at most \$0\.50 of grants approved a day, and this \$1\.00 grant is larger than that/,
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
