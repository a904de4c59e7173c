import { describe, expect, test } from "bun:test";
import { makeTestApp } from "../helpers/test-app";
import { expectError, UUID } from "../helpers/expect";

describe("the error envelope", () => {
  for (const [method, path] of [
    ["GET", "/nope"],
    ["GET", "/api/v1/nope"],
    ["GET", "/api/v2/status"],
    ["POST", "/api/v1/status"],
    ["PUT", "/api/v1/connections"],
    ["PATCH", "/api/v1/sessions"],
    ["GET", "/api/v1/sessions"],
  ] as const) {
    test(`404 not_found for ${method} ${path}`, async () => {
      const t = makeTestApp();
      const a = await t.createClientApp();
      await expectError(await t.call(path, { method, bearer: a.secretKey }), 404, "not_found");
    });
  }

  test("every response has its own x-request-id, errors included", async () => {
    const t = makeTestApp();
    const a = await t.createClientApp();
    const responses = await Promise.all([
      t.call("/healthz"),
      t.call("/healthz"),
      t.call("/nope"),
      t.call("/api/v1/status?appUserId=u", { bearer: a.secretKey }),
      t.call("/api/v1/status"),
      t.call("/api/v1/status", { bearer: a.secretKey }),
      t.call("/api/v1/openapi.json"),
    ]);
    const ids = responses.map((r) => r.headers.get("x-request-id"));
    for (const id of ids) expect(id ?? "").toMatch(UUID);
    expect(new Set(ids).size).toBe(ids.length);
  });

  describe("413 payload_too_large on an oversized declared content-length, before auth and parsing", () => {
    for (const [method, path] of [
      ["POST", "/api/v1/sessions"],
      ["POST", "/api/v1/connections"],
      ["POST", "/api/v1/status"],
      ["POST", "/nope"],
    ] as const) {
      test(`${method} ${path} without credentials`, async () => {
        const t = makeTestApp({ env: { MAX_BODY_BYTES: "2048" } });
        const res = await t.call(path, { method, body: "{}", headers: { "content-type": "application/json", "content-length": "2049" } });
        const error = await expectError(res, 413, "payload_too_large");
        expect(error.message).toContain("2048");
      });
    }

    test("a body exactly at the limit is not refused", async () => {
      const t = makeTestApp({ env: { MAX_BODY_BYTES: "1024" } });
      const a = await t.createClientApp();
      const json = JSON.stringify({ appUserId: "u".padEnd(1024 - '{"appUserId":""}'.length, "u") });
      expect(json.length).toBe(1024);
      const res = await t.call("/api/v1/sessions", { bearer: a.secretKey, json, headers: { "content-length": "1024" } });
      await expectError(res, 400, "invalid_request", /appUserId/); // too long for the schema, but parsed: not a 413
    });
  });

  test("an unexpected fault is a generic 500 internal, logged once with the request id and nothing leaked", async () => {
    const t = makeTestApp();
    const a = await t.createClientApp();
    await t.deps.store.close(); // every query now throws
    const res = await t.call("/api/v1/status?appUserId=u", { bearer: a.secretKey });
    const requestId = res.headers.get("x-request-id");
    const error = await expectError(res, 500, "internal", /^internal error$/);
    expect(Object.keys(error).sort()).toEqual(["code", "message"]);

    const logged = t.logger.lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.level === "error");
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ msg: "unhandled error", requestId, method: "GET", path: "/api/v1/status" });
    expect(t.logger.lines.join("\n")).not.toContain(a.secretKey);
  });

  test("ApiError details are placed inside error next to code and message", async () => {
    // The one error type's body shape, checked without a route: the budget errors rely on it.
    const { ApiError } = await import("../../src/errors");
    const body = new ApiError("budget_exceeded", "over", { limitUsd: 5, usedUsd: 5, remainingUsd: 0, resetsAt: "2026-02-01T00:00:00.000Z" }).toBody();
    expect(body).toEqual({
      error: { code: "budget_exceeded", message: "over", limitUsd: 5, usedUsd: 5, remainingUsd: 0, resetsAt: "2026-02-01T00:00:00.000Z" },
    });
    // Details can never overwrite the code or message.
    expect(new ApiError("auth", "no", { code: "x", message: "y" }).toBody()).toEqual({ error: { code: "auth", message: "no" } });
  });
});
