import { describe, expect, test } from "bun:test";
import { makeTestApp } from "../helpers/test-app";
import { expectOk } from "../helpers/expect";

describe("GET /healthz", () => {
  test("200 with mode demo when no upstream key is set", async () => {
    const t = makeTestApp();
    const body = await expectOk(await t.call("/healthz"));
    expect(body).toMatchObject({ status: "ok", mode: "demo", store: { kind: "sqlite", ok: true } });
    expect(body.upstream).toContain("demo");
  });

  test("mode upstream when an upstream key is set", async () => {
    const t = makeTestApp({ env: { UPSTREAM_API_KEY: "sk-or-test-key", UPSTREAM_BASE_URL: "https://upstream.example/api/v1" } });
    const res = await t.call("/healthz");
    const text = await res.clone().text();
    expect(text).not.toContain("sk-or-test-key");
    expect(await expectOk(res)).toMatchObject({ status: "ok", mode: "upstream", upstream: "https://upstream.example/api/v1" });
  });

  test("503 degraded when the store is down", async () => {
    const t = makeTestApp();
    await t.deps.store.close();
    const body = await expectOk(await t.call("/healthz"), 503);
    expect(body).toMatchObject({ status: "degraded", store: { ok: false } });
  });
});
