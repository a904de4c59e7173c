/**
 * openapi.json and the API reference page: the page is served from this service's own
 * pinned dependency (no other origin anywhere in it), under a strict CSP in a sandbox, on a
 * path apart from the consent popup. tests/e2e/docs-offline.test.ts renders it in Chromium.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { makeTestApp } from "../helpers/test-app";
import { expectOk, UUID } from "../helpers/expect";
import { REPO_ROOT } from "../helpers/server";
import { version } from "../../package.json";

const SWAGGER_UI_DIST = join(REPO_ROOT, "node_modules/swagger-ui-dist");

/** The page's CSP as directive → its values. */
function directives(csp: string): Record<string, string[]> {
  return Object.fromEntries(
    csp
      .split(";")
      .map((d) => d.trim().split(/\s+/))
      .map(([name, ...values]) => [name!, values]),
  );
}

/** Every `<tag ...>` opening tag of the page with its attributes. */
function tags(html: string, tag: string): Array<Record<string, string>> {
  return [...html.matchAll(new RegExp(`<${tag}\\b([^>]*)>`, "g"))].map((m) =>
    Object.fromEntries([...m[1]!.matchAll(/([\w-]+)(?:="([^"]*)")?/g)].map((a) => [a[1]!, a[2] ?? ""])),
  );
}

describe("docs", () => {
  test("GET /api/v1/openapi.json describes every endpoint", async () => {
    const t = makeTestApp();
    const spec = await expectOk(await t.call("/api/v1/openapi.json"));
    expect(spec.openapi).toMatch(/^3\./);
    expect(Object.keys(spec.paths)).toEqual(expect.arrayContaining(["/healthz", "/api/v1/sessions", "/api/v1/connections", "/api/v1/status"]));
  });

  test("the document carries the service's version, and the browser helper popup.js among its endpoints", async () => {
    const spec = await expectOk(await makeTestApp().call("/api/v1/openapi.json"));
    expect(spec.info.version).toBe(version);
    const popup = spec.paths["/api/v1/grants/popup.js"]?.get;
    expect(popup?.summary).toStartWith("Browser helper: MeteredProxy.requestGrant(");
    expect(Object.keys(popup?.responses?.["200"]?.content ?? {})).toEqual(["text/javascript"]);
    // The document's own files stay out of it.
    expect(Object.keys(spec.paths).filter((p) => p.startsWith("/docs") || p.endsWith("openapi.json") || p === "/")).toEqual([]);
  });

  test("GET / points at the reference, the document and the health probe", async () => {
    const res = await makeTestApp().call("/");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      name: "Metered model proxy",
      version,
      docs: "/docs",
      openapi: "/api/v1/openapi.json",
      health: "/healthz",
      api: "/api/v1",
    });
  });

  test("GET /docs is an HTML page under a strict, sandboxing Content-Security-Policy", async () => {
    const res = await makeTestApp().call("/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(res.headers.get("x-request-id")).toMatch(UUID);
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    const csp = directives(res.headers.get("content-security-policy") ?? "");
    expect(csp).toEqual({
      "default-src": ["'none'"],
      "script-src": ["'self'"],
      "style-src": ["'self'"],
      "img-src": ["data:"],
      "connect-src": ["'none'"],
      "form-action": ["'none'"],
      "frame-ancestors": ["'none'"],
      "base-uri": ["'none'"],
      // Scripts run, in an opaque origin: no allow-same-origin.
      sandbox: ["allow-scripts"],
    });
  });

  test("the page names no other origin and runs no inline script; the document is embedded as data", async () => {
    const t = makeTestApp();
    const html = await (await t.call("/docs")).text();
    expect(html).not.toMatch(/https?:|\/\/[\w.-]/);
    const scripts = tags(html, "script");
    expect(scripts.map((s) => s.src ?? s.type)).toEqual(["application/json", "/docs/swagger-ui.js", "/docs/start.js"]);
    // A script element without src is the JSON data block, which a browser never runs.
    expect([...html.matchAll(/<script\b[^>]*>([^<]+)<\/script>/g)]).toHaveLength(1);
    const embedded = /<script type="application\/json" id="openapi-document">([^<]*)<\/script>/.exec(html)?.[1];
    const served = await expectOk(await t.call("/api/v1/openapi.json"));
    expect(JSON.parse(embedded!)).toEqual(served);
  });

  test("every file the page loads is served here, the renderer from the exact-pinned swagger-ui-dist", async () => {
    const t = makeTestApp();
    const html = await (await t.call("/docs")).text();
    const files = [...tags(html, "script").map((s) => s.src), ...tags(html, "link").map((l) => l.href)].filter((u): u is string => !!u);
    expect(files.sort()).toEqual(["/docs/start.js", "/docs/swagger-ui.css", "/docs/swagger-ui.js"]);
    const expected: Record<string, [string, string | null]> = {
      "/docs/swagger-ui.js": ["text/javascript", join(SWAGGER_UI_DIST, "swagger-ui-bundle.js")],
      "/docs/swagger-ui.css": ["text/css", join(SWAGGER_UI_DIST, "swagger-ui.css")],
      "/docs/start.js": ["text/javascript", null],
    };
    for (const file of files) {
      const res = await t.call(file);
      const [contentType, source] = expected[file]!;
      expect({ file, status: res.status, type: res.headers.get("content-type") }).toEqual({ file, status: 200, type: `${contentType}; charset=utf-8` });
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      const body = await res.text();
      if (source) expect(body === (await Bun.file(source).text())).toBe(true);
      else expect(body).toContain("SwaggerUIBundle(");
    }
    const pinned = (await Bun.file(join(REPO_ROOT, "package.json")).json()).dependencies["swagger-ui-dist"];
    expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
    expect(pinned).toBe((await Bun.file(join(SWAGGER_UI_DIST, "package.json")).json()).version);
  });

  test("GET /api/v1/docs, the old address under the consent popup's prefix, redirects to /docs", async () => {
    const res = await makeTestApp().call("/api/v1/docs");
    expect(res.status).toBe(301);
    expect(res.headers.get("location")).toBe("/docs");
    expect(await res.text()).not.toContain("<script");
  });
});
