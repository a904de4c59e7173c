/**
 * /connections takes only session tokens; the secret-key endpoints take only secret keys;
 * and authentication runs before the body is parsed or validated.
 */
import { describe, expect, test } from "bun:test";
import { makeTestApp, mintSession } from "../helpers/test-app";
import { expectError, expectOk } from "../helpers/expect";

describe("each endpoint takes one kind of credential", () => {
  test("a secret key on /connections is 401 for every method", async () => {
    const t = makeTestApp();
    const a = t.createClientApp();
    await expectError(await t.call("/api/v1/connections", { bearer: a.secretKey }), 401, "auth", /session token/);
    await expectError(await t.call("/api/v1/connections", { bearer: a.secretKey, json: { monthlyUsd: 1 } }), 401, "auth");
    await expectError(await t.call("/api/v1/connections", { method: "DELETE", bearer: a.secretKey }), 401, "auth");
  });

  test("a session token on /status and /sessions is 401", async () => {
    const t = makeTestApp();
    const a = t.createClientApp();
    const token = await mintSession(t, a.secretKey, "u", 5);
    await expectOk(await t.call("/api/v1/connections", { bearer: token })); // the token itself is fine
    await expectError(await t.call("/api/v1/status?appUserId=u", { bearer: token }), 401, "auth", /secret key/);
    await expectError(await t.call("/api/v1/sessions", { bearer: token, json: { appUserId: "u" } }), 401, "auth");
  });
});

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
    const a = t.createClientApp();
    const token = await mintSession(t, a.secretKey, "u", 5);
    await expectError(await t.call("/api/v1/sessions", { bearer: a.secretKey, json: "{" }), 400, "invalid_request");
    await expectError(await t.call("/api/v1/connections", { bearer: token, json: "{" }), 400, "invalid_request");
    await expectError(await t.call("/api/v1/status", { bearer: a.secretKey }), 400, "invalid_request");
  });
});
