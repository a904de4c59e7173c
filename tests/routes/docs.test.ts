import { describe, expect, test } from "bun:test";
import { makeTestApp } from "../helpers/test-app";
import { expectOk, UUID } from "../helpers/expect";

describe("docs", () => {
  test("GET /api/v1/openapi.json describes every endpoint", async () => {
    const t = makeTestApp();
    const spec = await expectOk(await t.call("/api/v1/openapi.json"));
    expect(spec.openapi).toMatch(/^3\./);
    expect(Object.keys(spec.paths)).toEqual(expect.arrayContaining(["/healthz", "/api/v1/sessions", "/api/v1/connections", "/api/v1/status"]));
  });

  test("GET /api/v1/docs is an HTML page whose spec URL, resolved against the page, serves the spec", async () => {
    const t = makeTestApp();
    const res = await t.call("/api/v1/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(res.headers.get("x-request-id")).toMatch(UUID);
    const html = await res.text();
    // The page's script fetches `url` relative to the page, as a browser would.
    const configuration = /data-configuration='([^']*)'/.exec(html)?.[1];
    expect(configuration).toBeDefined();
    const specUrl = new URL((JSON.parse(configuration!) as { url: string }).url, "http://localhost/api/v1/docs");
    const spec = await t.call(specUrl.pathname + specUrl.search);
    expect(specUrl.pathname).toBe("/api/v1/openapi.json");
    expect((await expectOk(spec)).openapi).toMatch(/^3\./);
  });
});
