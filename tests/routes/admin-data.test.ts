/**
 * The admin API on an app's users, grants and usage: paged lists that follow their cursors
 * to the end, show and revoke, the export as JSON lines and CSV across several store
 * pages, and 400/404 for bad input and unknown apps.
 */
import { describe, expect, test } from "bun:test";
import { expectError, expectOk } from "../helpers/expect";
import { makeAdminTestApp, type AdminTestApp } from "../helpers/admin";
import { mintSession } from "../helpers/test-app";
import { userAccount } from "../../src/budget/accounts";
import { EXPORT_COLUMNS } from "../../src/services/operator/usage-export";
import type { UsageRow } from "../../src/budget/usage-row";
import { approveConsentOrThrow } from "../helpers/grants";

/** Every item of a paged admin list, following nextCursor with `limit` per page; also the pages' sizes. */
async function readAll(t: AdminTestApp, path: string, limit: number): Promise<{ items: any[]; pages: number[] }> {
  const items: any[] = [];
  const pages: number[] = [];
  for (let cursor: string | null = null; ;) {
    const page: { data: any[]; nextCursor: string | null } = await expectOk(await t.admin(`${path}?limit=${limit}${cursor ? `&cursor=${cursor}` : ""}`));
    items.push(...page.data);
    pages.push(page.data.length);
    if (page.nextCursor === null) return { items, pages };
    cursor = page.nextCursor;
  }
}

describe("connections", () => {
  test("list pages by user id to the end; show adds this month's spend; revoke refuses the user's calls", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp({ origins: ["https://a.example"] });
    const users = ["ann", "bob", "cy", 'dave, "the" tester/€', "eve"];
    for (const [i, user] of users.entries()) await t.deps.store.connections.approve(a.appId, user, (i + 1) * 1e9, t.clock.now());
    // One of them through the real flow, as an app's browser code does it.
    const token = await mintSession(t, a.secretKey, "zed", 7);
    await expectOk(await t.call("/api/v1/connections", { method: "POST", bearer: token }));

    const { items, pages } = await readAll(t, `/apps/${a.appId}/connections`, 2);
    expect(pages).toEqual([2, 2, 2]);
    expect(items.map((c) => [c.appUserId, c.monthlyUsd, c.revokedAt])).toEqual([...users.map((u, i) => [u, i + 1, null]), ["zed", 7, null]]);
    expect(items[0]).toEqual({
      appUserId: "ann",
      monthlyUsd: 1,
      fundingStatus: "ok",
      fundingSource: "app",
      connectedAt: "2026-01-15T00:00:00.000Z",
      revokedAt: null,
    });

    const odd = encodeURIComponent(users[3]!);
    await t.deps.store.usageLedger.insertBatch([ledgerRow(a.appId, users[3]!, 0, 1_250_000_000)]);
    expect(await expectOk(await t.admin(`/apps/${a.appId}/connections/${odd}`))).toEqual({
      appUserId: users[3],
      monthlyUsd: 4,
      usedUsd: 1.25,
      period: "2026-01",
      fundingStatus: "ok",
      fundingSource: "app",
      userKey: null,
      connectedAt: "2026-01-15T00:00:00.000Z",
      updatedAt: "2026-01-15T00:00:00.000Z",
      revokedAt: null,
    });

    expect(await expectOk(await t.admin(`/apps/${a.appId}/connections/zed`, { method: "DELETE" }))).toEqual({
      appId: a.appId,
      appUserId: "zed",
      revoked: true,
    });
    expect((await expectOk(await t.call("/api/v1/status?appUserId=zed", { bearer: a.secretKey }))).connected).toBe(false);
    await expectError(await t.admin(`/apps/${a.appId}/connections/zed`, { method: "DELETE" }), 404, "not_found", /no active connection for user zed/);
    await expectError(await t.admin(`/apps/${a.appId}/connections/nobody`), 404, "not_found", /no connection for user nobody/);
  });

  test("a bad limit or a cursor from elsewhere is 400; an unknown app is 404", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp();
    await expectError(await t.admin(`/apps/${a.appId}/connections?limit=0`), 400, "invalid_request");
    await expectError(await t.admin(`/apps/${a.appId}/connections?limit=1001`), 400, "invalid_request");
    await expectError(await t.admin(`/apps/${a.appId}/connections?cursor=bm90LWpzb24`), 400, "invalid_request", "cursor is not a cursor from this list");
    // A grants cursor is not a connections cursor.
    await expectError(await t.admin(`/apps/${a.appId}/connections?cursor=${Buffer.from('[1,"x"]').toString("base64url")}`), 400, "invalid_request");
    for (const path of ["/connections", "/connections/u", "/grants", "/grants/grtx", "/usage?from=2026-01-01&to=2026-01-02"]) {
      await expectError(await t.admin(`/apps/appnope${path}`, { method: path.startsWith("/grants/") ? "DELETE" : "GET" }), 404, "not_found", "no app appnope");
    }
  });
});

describe("grants", () => {
  test("list pages oldest first, never a token; revoke refuses the grant at once; another app's grant is 404", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp({ origins: ["https://a.example"] });
    const b = await t.createClientApp();
    const tokens: string[] = [];
    for (let i = 0; i < 5; i++) {
      const consent = await t.deps.store.grants.createConsentRequest(
        { appId: a.appId, usdCapNano: (i + 1) * 1e8, maxUses: i === 0 ? null : i, ttlSeconds: 3600, origin: "https://a.example", state: "" },
        t.clock.now(),
        60_000,
      );
      tokens.push((await approveConsentOrThrow(t.deps.store.grants, consent, t.clock.now())).grantToken);
      // Grants 1 to 3 share a millisecond, across a page boundary: the order is (createdAt, grantId).
      if (i === 0 || i === 3) t.clock.advance(1);
    }
    const response = await t.admin(`/apps/${a.appId}/grants?limit=1000`);
    const text = await response.clone().text();
    for (const token of tokens) expect(text).not.toContain(token);
    const { items, pages } = await readAll(t, `/apps/${a.appId}/grants`, 2);
    expect(pages).toEqual([2, 2, 1]);
    expect(items.map((g) => g.usd).sort()).toEqual([0.1, 0.2, 0.3, 0.4, 0.5]);
    const byKey = [...items].sort((x, y) => x.createdAt.localeCompare(y.createdAt) || (x.grantId < y.grantId ? -1 : 1));
    expect(items).toEqual(byKey);
    expect([items[0].usd, items[4].usd]).toEqual([0.1, 0.5]);
    expect((await expectOk(response)).data).toEqual(items);
    expect(items[0]).toEqual({
      grantId: expect.any(String),
      usd: 0.1,
      uses: 0,
      maxUses: null,
      origin: "https://a.example",
      createdAt: "2026-01-15T00:00:00.000Z",
      expiresAt: "2026-01-15T01:00:00.000Z",
      revokedAt: null,
    });

    const grantId = items[0].grantId as string;
    await expectError(await t.admin(`/apps/${b.appId}/grants/${grantId}`, { method: "DELETE" }), 404, "not_found", `no grant ${grantId} of app ${b.appId}`);
    expect(await expectOk(await t.admin(`/apps/${a.appId}/grants/${grantId}`, { method: "DELETE" }))).toEqual({ appId: a.appId, grantId, revoked: true });
    const current = await t.call("/api/v1/grants/current", { bearer: a.secretKey, headers: { "x-service-grant": tokens[0]! } });
    expect((await expectOk(current)).status).toBe("revoked");
  });
});

function ledgerRow(appId: string, appUserId: string | null, i: number, costNano = 1000 * i): UsageRow {
  return {
    requestId: `req-${String(i).padStart(5, "0")}`,
    account: appUserId ? userAccount(appId, "2026-01", appUserId) : "g/grtx",
    appId,
    appUserId,
    grantId: appUserId ? null : "grtx",
    period: "2026-01",
    model: i % 2 ? "openai/gpt-4o-mini" : 'a,"quoted" model',
    generationId: null,
    promptTokens: i,
    completionTokens: 2 * i,
    costNano,
    source: "upstream",
    status: "ok",
    streamed: i % 2 === 0,
    startedAt: Date.UTC(2026, 0, 1 + (i % 20), 12),
    finishedAt: Date.UTC(2026, 0, 1 + (i % 20), 12, 1),
    reservedNano: i % 3 ? 5000 * i : null,
    overrunNano: 0,
  };
}

describe("usage export", () => {
  const rowCount = 2100; // more than two of the store pages the export reads (1000 rows each)

  test("JSON lines and CSV: every row in the days asked, oldest first, streamed with the right content type", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp();
    const other = await t.createClientApp();
    await t.deps.store.usageLedger.insertBatch(Array.from({ length: rowCount }, (_, i) => ledgerRow(a.appId, i % 4 ? `user-${i % 7}` : null, i)));
    await t.deps.store.usageLedger.insertBatch([{ ...ledgerRow(other.appId, "x", 1), requestId: "other-app-row" }]);

    const jsonl = await t.admin(`/apps/${a.appId}/usage?from=2026-01-01&to=2026-01-31`);
    expect(jsonl.status).toBe(200);
    expect(jsonl.headers.get("content-type")).toBe("application/x-ndjson");
    expect(jsonl.headers.get("content-disposition")).toBe(`attachment; filename="usage-${a.appId}-2026-01-01-2026-01-31.jsonl"`);
    const rows = (await jsonl.text())
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(rows).toHaveLength(rowCount);
    const starts = rows.map((r) => r.startedAt);
    expect(starts).toEqual([...starts].sort());
    expect(rows.find((r) => r.requestId === "req-00003")).toEqual({
      requestId: "req-00003",
      startedAt: "2026-01-04T12:00:00.000Z",
      appUserId: "user-3",
      grantId: null,
      model: "openai/gpt-4o-mini",
      generationId: null,
      promptTokens: 3,
      completionTokens: 6,
      costUsd: 0.000003,
      source: "upstream",
      status: "ok",
      streamed: false,
      reservedUsd: null,
      overrunUsd: 0,
    });

    const csv = await t.admin(`/apps/${a.appId}/usage?from=2026-01-01&to=2026-01-02&format=csv`);
    expect(csv.headers.get("content-type")).toBe("text/csv; charset=utf-8");
    const lines = (await csv.text()).trimEnd().split("\n");
    expect(lines[0]).toBe(EXPORT_COLUMNS.join(","));
    expect(lines).toHaveLength(1 + (2 * rowCount) / 20);
    expect(lines.find((l) => l.startsWith("req-00001,"))).toBe(
      "req-00001,2026-01-02T12:00:00.000Z,user-1,,openai/gpt-4o-mini,,1,2,0.000001,upstream,ok,false,0.000005,0",
    );
    // RFC 4180 quoting, and a grant's row (no user).
    expect(lines.find((l) => l.startsWith("req-00020,"))).toBe(
      'req-00020,2026-01-01T12:00:00.000Z,,grtx,"a,""quoted"" model",,20,40,0.00002,upstream,ok,true,0.0001,0',
    );
  });

  test("CSV: text a spreadsheet would run as a formula is exported as text; JSON lines keep it exactly", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp();
    const users = ['=HYPERLINK("http://x")', "+1", "-2", "@SUM(A1)", "\tx", "plain-id", "a=b"];
    await t.deps.store.usageLedger.insertBatch(users.map((user, i) => ledgerRow(a.appId, user, i)));
    const csv = (await (await t.admin(`/apps/${a.appId}/usage?from=2026-01-01&to=2026-01-31&format=csv`)).text()).trimEnd().split("\n");
    const userColumn = EXPORT_COLUMNS.indexOf("appUserId");
    const exportedUsers = csv.slice(1).map((line) => line.match(/("([^"]|"")*"|[^,]*)(,|$)/g)![userColumn]!.replace(/,$/, ""));
    expect(exportedUsers).toEqual(['"\'=HYPERLINK(""http://x"")"', "'+1", "'-2", "'@SUM(A1)", "'\tx", "plain-id", "a=b"]);
    // Numbers are never touched, and the JSON lines export is exact.
    expect(csv[1]).toContain(",0,0,0,upstream,");
    const jsonl = (await (await t.admin(`/apps/${a.appId}/usage?from=2026-01-01&to=2026-01-31`)).text()).trimEnd().split("\n");
    expect(jsonl.map((line) => JSON.parse(line).appUserId)).toEqual(users);
  });

  test("a store failing on the first page gets the error envelope, not a 200 cut short (CSV header included)", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp();
    t.deps.store.usageLedger.listForApp = async () => {
      throw new Error("the store is down");
    };
    for (const format of ["jsonl", "csv"]) {
      const res = await t.admin(`/apps/${a.appId}/usage?from=2026-01-01&to=2026-01-31&format=${format}`);
      expect(res.status).toBe(500);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("internal");
    }
  });

  test("no rows: an empty body, or only the CSV header; bad days or format are 400", async () => {
    const t = makeAdminTestApp();
    const a = await t.createClientApp();
    expect(await (await t.admin(`/apps/${a.appId}/usage?from=2020-01-01&to=2020-01-31`)).text()).toBe("");
    expect(await (await t.admin(`/apps/${a.appId}/usage?from=2020-01-01&to=2020-01-31&format=csv`)).text()).toBe(`${EXPORT_COLUMNS.join(",")}\n`);
    const base = `/apps/${a.appId}/usage`;
    await expectError(await t.admin(`${base}?from=yesterday&to=2026-01-31`), 400, "invalid_request", "from must be a date like 2026-11-01");
    await expectError(await t.admin(`${base}?from=2026-01-01&to=2026-1-31`), 400, "invalid_request", "to must be a date like 2026-11-01");
    await expectError(await t.admin(`${base}?from=2026-01-31&to=2026-01-01`), 400, "invalid_request", "to must not be before from");
    await expectError(await t.admin(`${base}?from=2026-01-01&to=2026-01-31&format=xml`), 400, "invalid_request", /^query\.format/);
    await expectError(await t.admin(`${base}?from=2026-01-01`), 400, "invalid_request", /^query\.to/);
  });
});
