/**
 * Every dollar amount the service takes from outside is one it can count (src/money.ts
 * usdAmountToNano): a positive amount below one nano-dollar would be stored as 0 (a cap of
 * 0 turns its budget or grants off), so it is refused, naming the field, on every surface.
 * The CLI's flags are in tests/e2e/cli.test.ts, the environment's in tests/config.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { makeTestApp, mintSession } from "../helpers/test-app";
import { expectError, expectOk } from "../helpers/expect";
import { makeAdminTestApp } from "../helpers/admin";
import { CONSENT_ORIGIN, openConsentPage } from "../helpers/consent";

const BELOW_ONE_NANO = 1e-10;
const SMALLEST = /must be at least 0\.000000001 \(one nano-dollar/;

describe("API bodies: 400 invalid_request naming the field", () => {
  test("POST /sessions requestLimit.monthlyUsd: below one nano-dollar is refused, one nano-dollar is taken", async () => {
    const t = makeTestApp();
    const a = await t.createClientApp();
    const mint = (monthlyUsd: number) => t.call("/api/v1/sessions", { bearer: a.secretKey, json: { appUserId: "u", requestLimit: { monthlyUsd } } });
    await expectError(await mint(BELOW_ONE_NANO), 400, "invalid_request", new RegExp(`^requestLimit\\.monthlyUsd ${SMALLEST.source}`));
    await expectOk(await mint(1e-9));
  });

  test("POST /connections monthlyUsd: below one nano-dollar is refused and nothing is approved", async () => {
    const t = makeTestApp();
    const a = await t.createClientApp();
    const token = await mintSession(t, a.secretKey, "u");
    await expectError(
      await t.call("/api/v1/connections", { bearer: token, json: { monthlyUsd: BELOW_ONE_NANO } }),
      400,
      "invalid_request",
      new RegExp(`^monthlyUsd ${SMALLEST.source}`),
    );
    expect(await t.deps.store.connections.findActive(a.appId, "u")).toBeNull();
    const approved = await expectOk(await t.call("/api/v1/connections", { bearer: token, json: { monthlyUsd: 1.5e-9 } }));
    expect(approved.limits.monthlyUsd).toBe(1e-9); // rounded down: a cap is never over-stated
  });

  test("admin create and update: maxGrantUsd and grantDailyCeilingUsd below one nano-dollar (stored as 0 before) or infinite", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp();
    for (const field of ["maxGrantUsd", "grantDailyCeilingUsd"]) {
      const message = new RegExp(`^${field} ${SMALLEST.source}.*\\(or null\\)`);
      await expectError(await t.admin("/apps", { json: { name: "x", [field]: BELOW_ONE_NANO } }), 400, "invalid_request", message);
      await expectError(await t.admin(`/apps/${a.appId}`, { method: "PATCH", json: { [field]: BELOW_ONE_NANO } }), 400, "invalid_request", message);
      // JSON's 1e999 parses to Infinity: the schema refuses it before the service sees it.
      await expectError(await t.admin("/apps", { json: `{"name":"x","${field}":1e999}` }), 400, "invalid_request", new RegExp(field));
    }
    expect(await t.deps.store.apps.count()).toBe(1);
    const app = await t.deps.store.apps.find(a.appId);
    expect({ maxGrantNano: app?.maxGrantNano, grantDailyCeilingNano: app?.grantDailyCeilingNano }).toEqual({ maxGrantNano: null, grantDailyCeilingNano: null });
    const updated = await expectOk(await t.admin(`/apps/${a.appId}`, { method: "PATCH", json: { maxGrantUsd: 1e-9, grantDailyCeilingUsd: 1e-9 } }));
    expect(updated).toMatchObject({ maxGrantUsd: 1e-9, grantDailyCeilingUsd: 1e-9 });
  });
});

describe("pages: an error page, 400", () => {
  test("the consent page's usd below one nano-dollar records no consent request", async () => {
    const t = makeTestApp();
    const { appId } = await t.createClientApp({ origins: [CONSENT_ORIGIN] });
    const res = await openConsentPage({ app: t.app, appId }, { usd: String(BELOW_ONE_NANO) });
    expect(res.status).toBe(400);
    const html = await res.text();
    expect(html).toContain("The amount must be a number of dollars greater than 0 (at least $0.000000001).");
    expect(html).not.toContain("ct_");
    const consentRequests = () => t.db.query<{ n: number }, []>("SELECT count(*) AS n FROM consent_requests").get()!.n;
    expect(consentRequests()).toBe(0);
    expect((await openConsentPage({ app: t.app, appId }, { usd: "0.000000001" })).status).toBe(200);
    expect(consentRequests()).toBe(1);
  });

  test("the connect page's monthlyUsd below one nano-dollar", async () => {
    const t = makeTestApp();
    const { appId } = await t.createClientApp({ origins: [CONSENT_ORIGIN] });
    const open = (monthlyUsd: string) => t.call(`/api/v1/connect?${new URLSearchParams({ appId, origin: CONSENT_ORIGIN, monthlyUsd })}`);
    const res = await open("0.0000000001");
    expect(res.status).toBe(400);
    expect(await res.text()).toContain("The monthly amount must be a number of dollars greater than 0 (at least $0.000000001).");
    expect((await open("0.000000001")).status).toBe(200);
  });
});
