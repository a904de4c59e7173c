/**
 * GET /api/v1/connect: the hosted connect page is shown only for a live app opened from one
 * of its registered origins, under the same strict headers as the consent page, with the
 * app's name escaped; anything else is an error page that changes nothing.
 */
import { describe, expect, test } from "bun:test";
import { makeTestApp } from "../helpers/test-app";

const ORIGIN = "https://app.example";

async function setUp() {
  const t = makeTestApp();
  const a = await t.createClientApp({ name: `Tom & "Jerry" <script>`, origins: [ORIGIN] });
  const open = (query: Record<string, string>) => t.call(`/api/v1/connect?${new URLSearchParams(query)}`);
  return { t, a, open };
}

describe("GET /api/v1/connect", () => {
  test("the page: app name escaped, the cap asked for, strict headers, no credential inside", async () => {
    const { a, open } = await setUp();
    const res = await open({ appId: a.appId, origin: ORIGIN, monthlyUsd: "12.5" });
    expect(res.status).toBe(200);
    const csp = res.headers.get("content-security-policy")!;
    for (const directive of ["default-src 'none'", "frame-ancestors 'none'", "connect-src 'self'", "form-action 'none'"]) expect(csp).toContain(directive);
    expect(csp).toMatch(/script-src 'nonce-[A-Za-z0-9]+'/);
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("cache-control")).toBe("no-store");
    const html = await res.text();
    expect(html).toContain("Tom &amp; &quot;Jerry&quot; &lt;script&gt;");
    expect(html).not.toContain('<script>"');
    expect(html).toContain("up to $12.50 a month");
    expect(html).not.toMatch(/sk_live_|eyJ/);
    // Approve is never the element focused or marked for it.
    expect(html).not.toContain("autofocus");
  });

  test("no cap asked for: the user picks", async () => {
    const { a, open } = await setUp();
    expect(await (await open({ appId: a.appId, origin: ORIGIN })).text()).toContain("the amount you choose");
  });

  test("an unknown or disabled app, an unregistered origin, a bad or too large cap: an error page, 400", async () => {
    const { t, a, open } = await setUp();
    const cases: Array<[Record<string, string>, string]> = [
      [{ appId: "appnope", origin: ORIGIN }, "unknown or no longer active"],
      [{ appId: a.appId, origin: "https://evil.example" }, "not one of the app&#39;s registered origins"],
      [{ appId: a.appId }, "not one of the app&#39;s registered origins"],
      [{ appId: a.appId, origin: ORIGIN, monthlyUsd: "-1" }, "greater than 0"],
      [{ appId: a.appId, origin: ORIGIN, monthlyUsd: "abc" }, "greater than 0"],
      [{ appId: a.appId, origin: ORIGIN, monthlyUsd: "1000000" }, "at most $1000"],
    ];
    for (const [query, message] of cases) {
      const res = await open(query);
      expect({ query, status: res.status }).toEqual({ query, status: 400 });
      expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
      expect(await res.text()).toContain(message);
    }
    await t.deps.store.apps.setDisabled(a.appId, t.clock.now());
    expect(await (await open({ appId: a.appId, origin: ORIGIN })).text()).toContain("unknown or no longer active");
  });
});

describe("GET /api/v1/connect: who pays", () => {
  const allow = async (fundingSources: Array<"app" | "user">) => {
    const set = await setUp();
    await set.t.deps.store.apps.update(set.a.appId, { fundingSources });
    return set;
  };

  test("an app that allows only its own funding: no word of the user's account", async () => {
    const { a, open } = await setUp();
    const html = await (await open({ appId: a.appId, origin: ORIGIN })).text();
    expect(html).not.toContain('id="funding');
    expect(html).not.toContain('type="radio"');
  });

  test("both allowed: a choice, the app's first unless connect() asked for the user's", async () => {
    const { a, open } = await allow(["app", "user"]);
    const plain = await (await open({ appId: a.appId, origin: ORIGIN })).text();
    expect(plain).toContain('<input type="radio" name="funding" value="app" checked>');
    expect(plain).toContain('<input type="radio" name="funding" value="user">Pay with my own upstream account');
    const own = await (await open({ appId: a.appId, origin: ORIGIN, funding: "user" })).text();
    expect(own).toContain('<input type="radio" name="funding" value="user" checked>');
    expect(own).toContain('"funding":"user"');
  });

  test("only the user's account allowed: that path alone, no choice", async () => {
    const { a, open } = await allow(["user"]);
    const html = await (await open({ appId: a.appId, origin: ORIGIN })).text();
    expect(html).toContain("You pay with your own upstream account");
    expect(html).not.toContain('type="radio"');
    expect(html).toContain('"funding":"user"');
  });

  test("funding=user for an app that does not allow it, or an unknown source: an error page, 400", async () => {
    const { a, open } = await setUp();
    const refused = await open({ appId: a.appId, origin: ORIGIN, funding: "user" });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain("does not let its users pay with their own upstream account");
    const unknown = await open({ appId: a.appId, origin: ORIGIN, funding: "card" });
    expect(unknown.status).toBe(400);
    expect(await unknown.text()).toContain("Unknown funding source: card.");
  });
});
