import { describe, expect, test } from "bun:test";
import { makeTestApp } from "../helpers/test-app";
import { expectOk } from "../helpers/expect";

/** The operator's token: with it /healthz adds its counters and last errors. */
const OPERATOR_TOKEN = "operator-metrics-token-0123";
const operatorApp = (env: Record<string, string> = {}) => makeTestApp({ env: { METRICS_TOKEN: OPERATOR_TOKEN, ...env } });

describe("GET /healthz", () => {
  test("200 with mode demo when no upstream key is set", async () => {
    const t = makeTestApp();
    await t.deps.catalogue.refresh();
    const body = await expectOk(await t.call("/healthz"));
    expect(body).toMatchObject({ status: "ok", problems: [], mode: "demo", store: { kind: "sqlite", ok: true } });
    expect(body.upstream).toContain("demo");
  });

  test("mode upstream when an upstream key is set", async () => {
    const t = makeTestApp({ env: { UPSTREAM_API_KEY: "sk-or-test-key", UPSTREAM_BASE_URL: "https://upstream.example/api/v1" } });
    const res = await t.call("/healthz");
    const text = await res.clone().text();
    expect(text).not.toContain("sk-or-test-key");
    // The upstream here does not exist: the price list never loads, and health says so.
    expect(await expectOk(res)).toMatchObject({ status: "degraded", mode: "upstream", upstream: "https://upstream.example/api/v1" });
  });

  test("without the operator's token: no credentials of the upstream's URL, no counters, no error texts", async () => {
    const t = operatorApp({
      ADMIN_TOKEN: "admin-token-0123456789abcdefghijklmnopqrstuvwxyz",
      UPSTREAM_API_KEY: "sk-or-test-key",
      UPSTREAM_BASE_URL: "https://operator:hunter2pass@upstream.example/api/v1?key=query-secret",
    });
    // The admin token is the admin API's alone: here it is just a wrong token.
    for (const bearer of [undefined, "wrong-token-0123456789", "admin-token-0123456789abcdefghijklmnopqrstuvwxyz"]) {
      const res = await t.call("/healthz", { bearer });
      const text = await res.clone().text();
      for (const secret of ["hunter2pass", "operator:", "query-secret", "sk-or-test-key"]) expect(text).not.toContain(secret);
      const body = await expectOk(res);
      expect(body.upstream).toBe("https://upstream.example/api/v1");
      expect(Object.keys(body).sort()).toEqual(["budget", "limiter", "mode", "problems", "status", "store", "upstream", "writer"]);
      expect(body.writer).toEqual({ failing: false });
      expect(Object.keys(body.limiter).sort()).toEqual(["degraded", "kind"]);
    }
    // The metrics token shows the counters, and still no credentials.
    const res = await t.call("/healthz", { bearer: OPERATOR_TOKEN });
    expect(await res.clone().text()).not.toContain("hunter2pass");
    const body = await expectOk(res);
    expect(body).toMatchObject({ writer: { failing: false, written: 0, pending: 0 }, activeStreams: 0, overruns: { count: 0 } });
    expect(body.pricing).toBeDefined();
  });

  test("503 degraded when the store is down", async () => {
    const t = makeTestApp();
    await t.deps.store.close();
    const body = await expectOk(await t.call("/healthz"), 503);
    expect(body).toMatchObject({ status: "degraded", store: { ok: false } });
    expect(body.problems).toContain("the store (sqlite) is unreachable");
  });
});

describe("GET /readyz", () => {
  test("200 ready once the price list is loaded and the store answers", async () => {
    const t = makeTestApp();
    await t.deps.catalogue.refresh();
    expect(await expectOk(await t.call("/readyz"))).toEqual({ ready: true, problems: [], warnings: [] });
  });

  test("503 while the upstream's price list is empty (the upstream is unreachable)", async () => {
    const t = operatorApp();
    const body = await expectOk(await t.call("/readyz"), 503);
    expect(body.ready).toBe(false);
    expect(body.problems[0]).toStartWith("the upstream's price list is empty");
    const health = await expectOk(await t.call("/healthz", { bearer: OPERATOR_TOKEN }));
    expect(health).toMatchObject({ status: "degraded", pricing: { models: 0, refreshedAt: null } });
  });

  test("503 while the price list is stale: three refresh intervals without a load", async () => {
    const t = makeTestApp({ env: { PRICING_REFRESH_SECONDS: "60" } });
    await t.deps.catalogue.refresh();
    const realNow = Date.now;
    Date.now = () => realNow() + 181_000;
    try {
      const body = await expectOk(await t.call("/readyz"), 503);
      expect(body.problems[0]).toMatch(/^the upstream's price list is stale: last loaded 18\d s ago$/);
    } finally {
      Date.now = realNow;
    }
  });

  test("503 while the usage writer is failing, ready again once a flush succeeds", async () => {
    const t = operatorApp();
    await t.deps.catalogue.refresh();
    t.db.exec("ALTER TABLE usage_totals RENAME TO usage_totals_away");
    t.deps.usageWriter.enqueue({
      requestId: "r1",
      account: "a",
      appId: "app",
      appUserId: "u",
      grantId: null,
      period: "2026-01",
      model: "m",
      generationId: null,
      promptTokens: 1,
      completionTokens: 1,
      costNano: 1,
      source: "upstream",
      status: "ok",
      streamed: false,
      startedAt: 1,
      finishedAt: 2,
    });
    await t.deps.usageWriter.flush();
    const body = await expectOk(await t.call("/readyz"), 503);
    expect(body.problems[0]).toStartWith("the usage writer is failing");
    expect((await expectOk(await t.call("/healthz", { bearer: OPERATOR_TOKEN }))).writer).toMatchObject({ failing: true, pending: 1 });
    t.db.exec("ALTER TABLE usage_totals_away RENAME TO usage_totals");
    await t.deps.usageWriter.flush();
    expect(await expectOk(await t.call("/readyz"))).toEqual({ ready: true, problems: [], warnings: [] });
  });
});
