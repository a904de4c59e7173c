import { describe, expect, test } from "bun:test";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";
import { CONSENT_ORIGIN as ORIGIN, consentTokenIn, obtainGrant, openConsentPage as consentPage } from "../helpers/consent";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

const json = async (r: Response): Promise<any> => r.json();
const ask = (extra: Record<string, unknown> = {}) => ({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 20, ...extra });

const withGrant = (token: string) => ({ "x-service-user": "", "x-service-grant": token });
const current = (t: ChatTestApp, token: string, method = "GET") =>
  t.app.handle(
    new Request("http://localhost/api/v1/grants/current", { method, headers: { authorization: `Bearer ${t.secretKey}`, "x-service-grant": token } }),
  );

describe("consent page", () => {
  test("names the app, origin, amount, uses and expiry, under a strict CSP that forbids framing", async () => {
    const t = await chatTestApp();
    const res = await consentPage(t, { maxUses: "3", ttl: "3600" });
    const html = await res.text();
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(html).toContain("chat-test");
    expect(html).toContain(ORIGIN);
    expect(html).toContain("$1.00");
    expect(html).toContain("3 requests");
    const csp = res.headers.get("content-security-policy")!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain("unsafe-inline");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
  });

  test("bad parameters render an error page with no consent token", async () => {
    const t = await chatTestApp();
    const bad: Array<Record<string, string>> = [
      { origin: "https://evil.example" },
      { usd: "0" },
      { usd: "abc" },
      { usd: "500" },
      { appId: "appnope" },
      { ttl: "99999999" },
      { maxUses: "0" },
    ];
    for (const params of bad) {
      const res = await consentPage(t, params);
      expect(res.status).toBe(400);
      const html = await res.text();
      expect(html).toContain("cannot be shown");
      expect(html).not.toContain("ct_");
    }
  });

  test("a consent token approves once", async () => {
    const t = await chatTestApp();
    const { consentToken } = await obtainGrant(t);
    const again = await t.app.handle(
      new Request("http://localhost/api/v1/grants/consent", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ consentToken }),
      }),
    );
    expect(again.status).toBe(400);
  });

  test("an app disabled after its consent page was shown gets no grant when the user approves", async () => {
    const t = await chatTestApp();
    const consentToken = consentTokenIn(await (await consentPage(t, {})).text());
    await t.deps.store.apps.setDisabled(t.appId, t.clock.now());
    const approve = () =>
      t.app.handle(
        new Request("http://localhost/api/v1/grants/consent", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ consentToken }),
        }),
      );
    const refused = await approve();
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain("no longer active");
    expect(await t.deps.store.grants.listForApp(t.appId, 10)).toEqual([]);
    // Enabled again, the same page's token works: nothing was consumed by the refusal.
    await t.deps.store.apps.setDisabled(t.appId, null);
    expect((await approve()).status).toBe(200);
  });

  test("a cross-site POST is refused", async () => {
    const t = await chatTestApp();
    const consentToken = consentTokenIn(await (await consentPage(t, {})).text());
    const res = await t.app.handle(
      new Request("http://localhost/api/v1/grants/consent", {
        method: "POST",
        headers: { "content-type": "application/json", "sec-fetch-site": "cross-site" },
        body: JSON.stringify({ consentToken }),
      }),
    );
    expect(res.status).toBe(400);
  });
});

describe("redeeming a grant", () => {
  test("a chat call draws on the grant, counts a use, and /grants/current shows it", async () => {
    const t = await chatTestApp();
    const grant = await obtainGrant(t, { maxUses: "5" });
    expect(grant.grantToken).toMatch(/^gt_[0-9A-Za-z]{32,}$/);
    const res = await t.chat(ask({ stream: true }), withGrant(grant.grantToken));
    expect(res.status).toBe(200);
    await res.text();
    await t.app.decorator.chat.idle(5000);
    const view = await json(await current(t, grant.grantToken));
    expect(view).toMatchObject({ grantId: grant.grantId, usdCap: 1, uses: 1, maxUses: 5, status: "active" });
    expect(view.usedUsd).toBeGreaterThan(0);
    expect(view.remainingUsd).toBeCloseTo(1 - view.usedUsd, 9);
    await t.flush();
    const row = (await t.deps.store.usageLedger.find(res.headers.get("x-request-id")!))!;
    expect(row).toMatchObject({ grantId: grant.grantId, appUserId: null });
  });

  test("both headers at once is 400", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const grant = await obtainGrant(t);
    const res = await t.chat(ask(), { "x-service-user": "alice", "x-service-grant": grant.grantToken });
    expect(res.status).toBe(400);
  });

  const cases: Array<[string, (t: ChatTestApp, token: string) => Promise<void>, RegExp]> = [
    ["unknown", async () => {}, /unknown/],
    ["revoked", async (t, token) => void (await current(t, token, "DELETE")), /revoked/],
    ["expired", async (t) => t.clock.advance(3601 * 1000), /expired/],
    ["fully used", async (t, token) => void (await (await t.chat(ask(), withGrant(token))).text()), /fully used/],
  ];
  for (const [name, setup, message] of cases) {
    test(`a ${name} grant is 402 grant_invalid saying so`, async () => {
      const t = await chatTestApp();
      const grant = await obtainGrant(t, { ttl: "3600", maxUses: "1" });
      await setup(t, grant.grantToken);
      const token = name === "unknown" ? "gt_" + "x".repeat(40) : grant.grantToken;
      const res = await t.chat(ask(), withGrant(token));
      expect(res.status).toBe(402);
      const { error } = await json(res);
      expect(error.code).toBe("grant_invalid");
      expect(error.message).toMatch(message);
    });
  }

  test("another app's grant is 402 grant_invalid", async () => {
    const t = await chatTestApp();
    const grant = await obtainGrant(t);
    const { key } = await createAppWithKey(t.deps.store.apps, "other", [ORIGIN], t.clock.now());
    const res = await t.app.handle(
      new Request("http://localhost/api/v1/chat/completions", {
        method: "POST",
        headers: { authorization: `Bearer ${key.secretKey}`, "content-type": "application/json", "x-service-grant": grant.grantToken },
        body: JSON.stringify(ask()),
      }),
    );
    expect(res.status).toBe(402);
    // The same words as for a token that does not exist: nothing confirms it is valid elsewhere.
    expect((await json(res)).error.message).toBe("unknown grant token");
  });

  test("a grant over its cap is 402 grant_invalid with the budget numbers", async () => {
    const t = await chatTestApp();
    const grant = await obtainGrant(t, { usd: "0.000001" });
    const res = await t.chat(ask(), withGrant(grant.grantToken));
    expect(res.status).toBe(402);
    const { error } = await json(res);
    expect(error).toMatchObject({ code: "grant_invalid", limitUsd: 0.000001 });
    expect(error.message).toMatch(/cap/);
  });

  test("50 concurrent calls on a grant with a small cap never pass the cap", async () => {
    const t = await chatTestApp({ env: { RL_CHAT_LIMIT: "1000" } });
    const capUsd = 0.0005;
    const grant = await obtainGrant(t, { usd: String(capUsd) });
    const responses = await Promise.all(
      Array.from({ length: 50 }, () =>
        t.chat(ask({ max_tokens: 200, messages: [{ role: "user", content: "story [[mock tokens=150]]" }] }), withGrant(grant.grantToken)),
      ),
    );
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0);
    expect(statuses.filter((s) => s === 402).length).toBeGreaterThan(0);
    await Promise.all(responses.map((r) => r.text()));
    await t.app.decorator.chat.idle(5000);
    await t.flush();
    const spent = (t.db.query("SELECT sum(cost_nano) AS s FROM usage_ledger WHERE grant_id = ?").get(grant.grantId) as { s: number }).s;
    expect(spent).toBeLessThanOrEqual(capUsd * 1e9);
    const view = await json(await current(t, grant.grantToken));
    expect(Math.round(view.usedUsd * 1e9)).toBe(spent);
    expect(view.uses).toBe(statuses.filter((s) => s === 200).length);
  });
});
