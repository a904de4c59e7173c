import { describe, expect, test } from "bun:test";
import { makeTestApp, mintSession } from "../helpers/test-app";
import { expectError, expectOk, UUID } from "../helpers/expect";

const CONNECTIONS = "/api/v1/connections";
const A_ORIGIN = "https://a.example";
const B_ORIGIN = "https://b.example:8443";

async function setup() {
  const t = makeTestApp();
  const a = await t.createClientApp({ name: "A", origins: [A_ORIGIN] });
  const b = await t.createClientApp({ name: "B", origins: [B_ORIGIN] });
  return { t, a, b };
}

const preflight = (origin: string) => ({
  method: "OPTIONS",
  headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" },
});

describe("CORS on /api/v1/connections", () => {
  test("a preflight from a registered origin gets the allow headers", async () => {
    const { t } = await setup();
    const res = await t.call(CONNECTIONS, preflight(A_ORIGIN));
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe(A_ORIGIN);
    expect(res.headers.get("access-control-allow-methods")).toContain("POST");
    expect(res.headers.get("access-control-allow-methods")).toContain("DELETE");
    expect(res.headers.get("access-control-allow-headers")?.toLowerCase()).toContain("authorization");
    expect(res.headers.get("access-control-allow-headers")?.toLowerCase()).toContain("content-type");
    expect(res.headers.get("vary")).toContain("Origin");
    expect(res.headers.get("x-request-id")).toMatch(UUID);
    expect(await res.text()).toBe("");
  });

  test("a preflight from any app's registered origin is allowed (the token narrows it later)", async () => {
    const { t } = await setup();
    const res = await t.call(CONNECTIONS, preflight(B_ORIGIN));
    expect(res.headers.get("access-control-allow-origin")).toBe(B_ORIGIN);
  });

  for (const origin of ["https://evil.example", "https://a.example:444", "http://a.example", "https://a.example.evil.example", "null"]) {
    test(`a preflight from an unregistered origin (${origin}) gets no CORS headers`, async () => {
      const { t } = await setup();
      const res = await t.call(CONNECTIONS, preflight(origin));
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
      expect(res.headers.get("access-control-allow-methods")).toBeNull();
      expect(res.headers.get("access-control-allow-headers")).toBeNull();
    });
  }

  test("a preflight from the origin of a disabled app gets no CORS headers", async () => {
    const { t, a } = await setup();
    t.db.query("UPDATE apps SET disabled_at = ? WHERE id = ?").run(t.clock.now(), a.appId);
    const res = await t.call(CONNECTIONS, preflight(A_ORIGIN));
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });

  test("an actual request from the token's own app origin is allowed", async () => {
    const { t, a } = await setup();
    const token = await mintSession(t, a.secretKey, "u", 5);
    for (const method of ["GET", "POST", "DELETE"]) {
      const res = await t.call(CONNECTIONS, { method, bearer: token, headers: { origin: A_ORIGIN } });
      expect(res.status).toBeLessThan(300);
      expect(res.headers.get("access-control-allow-origin")).toBe(A_ORIGIN);
    }
  });

  test("an actual request whose Origin belongs to another app gets no access-control-allow-origin", async () => {
    const { t, a } = await setup();
    const token = await mintSession(t, a.secretKey, "u", 5);
    for (const method of ["GET", "POST", "DELETE"]) {
      const res = await t.call(CONNECTIONS, { method, bearer: token, headers: { origin: B_ORIGIN } });
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
    }
  });

  test("an actual request from an unregistered origin gets no access-control-allow-origin", async () => {
    const { t, a } = await setup();
    const token = await mintSession(t, a.secretKey, "u", 5);
    const res = await t.call(CONNECTIONS, { bearer: token, headers: { origin: "https://evil.example" } });
    await expectOk(res);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });

  test("a 401 from a registered origin still carries the CORS grant so the browser can read the error", async () => {
    const { t } = await setup();
    const res = await t.call(CONNECTIONS, { headers: { origin: A_ORIGIN } });
    expect(res.headers.get("access-control-allow-origin")).toBe(A_ORIGIN);
    await expectError(res, 401, "auth");
  });

  test("other endpoints send no CORS headers", async () => {
    const { t, a } = await setup();
    for (const path of ["/api/v1/status?appUserId=u", "/api/v1/sessions", "/healthz"]) {
      const res = await t.call(path, { bearer: a.secretKey, headers: { origin: A_ORIGIN } });
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
    }
  });
});
