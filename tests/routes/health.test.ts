import { describe, expect, test } from "bun:test";
import { makeTestApp } from "../helpers/test-app";
import { expectOk } from "../helpers/expect";

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
    expect(await expectOk(await t.call("/readyz"))).toEqual({ ready: true, problems: [] });
  });

  test("503 while the upstream's price list is empty (the upstream is unreachable)", async () => {
    const t = makeTestApp();
    const body = await expectOk(await t.call("/readyz"), 503);
    expect(body.ready).toBe(false);
    expect(body.problems[0]).toStartWith("the upstream's price list is empty");
    const health = await expectOk(await t.call("/healthz"));
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
    const t = makeTestApp();
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
    expect((await expectOk(await t.call("/healthz"))).writer).toMatchObject({ failing: true, pending: 1 });
    t.db.exec("ALTER TABLE usage_totals_away RENAME TO usage_totals");
    await t.deps.usageWriter.flush();
    expect(await expectOk(await t.call("/readyz"))).toEqual({ ready: true, problems: [] });
  });
});
