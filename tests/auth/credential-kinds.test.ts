/** Authentication runs before the body is parsed or validated. */
import { describe, test } from "bun:test";
import { makeTestApp, mintSession } from "../helpers/test-app";
import { expectError } from "../helpers/expect";

// A secret key on /connections and a session token on the secret-key endpoints (every
// method, exact messages): tests/security/auth-matrix.test.ts.

describe("authentication runs before parsing and validation", () => {
  const badBodies: Array<[string, { body: string; type: string }]> = [
    ["malformed JSON", { body: "{", type: "application/json" }],
    ["a schema violation", { body: JSON.stringify({ appUserId: 42, monthlyUsd: -1 }), type: "application/json" }],
    ["a form body", { body: "a=1", type: "application/x-www-form-urlencoded" }],
    ["a text body", { body: "hello", type: "text/plain" }],
  ];
  for (const [name, { body, type }] of badBodies) {
    for (const path of ["/api/v1/sessions", "/api/v1/connections"]) {
      test(`POST ${path} with ${name} and no credential is 401, not 400`, async () => {
        const t = makeTestApp();
        await expectError(await t.call(path, { method: "POST", body, headers: { "content-type": type } }), 401, "auth");
      });
      test(`POST ${path} with ${name} and a wrong credential is 401, not 400`, async () => {
        const t = makeTestApp();
        const res = await t.call(path, { method: "POST", bearer: "sk_live_appnope_" + "x".repeat(32), body, headers: { "content-type": type } });
        await expectError(res, 401, "auth");
      });
    }
  }

  test("GET /status with no appUserId and no credential is 401, not 400", async () => {
    const t = makeTestApp();
    await expectError(await t.call("/api/v1/status"), 401, "auth");
  });

  test("with a valid credential the same bad inputs are 400", async () => {
    const t = makeTestApp();
    const a = await t.createClientApp();
    const token = await mintSession(t, a.secretKey, "u", 5);
    await expectError(await t.call("/api/v1/sessions", { bearer: a.secretKey, json: "{" }), 400, "invalid_request");
    await expectError(await t.call("/api/v1/connections", { bearer: token, json: "{" }), 400, "invalid_request");
    await expectError(await t.call("/api/v1/status", { bearer: a.secretKey }), 400, "invalid_request");
  });
});
