/**
 * Real responses, success and error, validate against the published openapi.json with ajv:
 * the document promises what the endpoints really return.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp, mintSession, type TestApp } from "./helpers/test-app";
import { chatTestApp } from "./helpers/chat-app";
import { publishedDocument, type Json, type PublishedDocument } from "./helpers/openapi-validator";

let t: TestApp;
let doc: PublishedDocument;

beforeAll(async () => {
  t = makeTestApp({ env: { MAX_MONTHLY_USD: "100", MAX_BODY_BYTES: "4096" } });
  doc = await publishedDocument(t.call);
});

const conformance = (method: string, path: string, res: Response) => doc.conformance(method, path, res);
const responseValidator = (method: string, path: string, status: number) => doc.responseValidator(method, path, status);
const operation = (method: string, path: string) => doc.operation(method, path);

describe("real responses validate against openapi.json", () => {
  test("POST /api/v1/sessions: 200, 400, 401, 413, 429", async () => {
    const a = await t.createClientApp();
    const p = "/api/v1/sessions";
    const calls = [
      t.call(p, { bearer: a.secretKey, json: { appUserId: "u", requestLimit: { monthlyUsd: 5 } } }),
      t.call(p, { bearer: a.secretKey, json: { appUserId: "u" } }),
      t.call(p, { bearer: a.secretKey, json: { appUserId: 5 } }),
      t.call(p, { bearer: a.secretKey, json: { appUserId: "u", requestLimit: { monthlyUsd: 1_000 } } }),
      t.call(p, { bearer: a.secretKey, json: "{" }),
      t.call(p, { json: { appUserId: "u" } }),
      t.call(p, { bearer: a.secretKey, json: {}, headers: { "content-length": "5000" } }),
    ];
    const statuses: number[] = [];
    for (const res of await Promise.all(calls)) {
      statuses.push(res.status);
      expect({ status: res.status, errors: await conformance("post", p, res) }).toEqual({ status: res.status, errors: [] });
    }
    expect(statuses).toEqual([200, 200, 400, 400, 400, 401, 413]);

    const limitedApp = makeTestApp({ env: { RL_SESSIONS_LIMIT: "1" } });
    const c = await limitedApp.createClientApp();
    expect((await limitedApp.call(p, { bearer: c.secretKey, json: { appUserId: "u" } })).status).toBe(200);
    const limited = await limitedApp.call(p, { bearer: c.secretKey, json: { appUserId: "u" } });
    expect({ status: limited.status, errors: await conformance("post", p, limited) }).toEqual({ status: 429, errors: [] });
  });

  test("POST, GET and DELETE /api/v1/connections: 200 (connected and not), 204, 400, 401, 413", async () => {
    const a = await t.createClientApp();
    const p = "/api/v1/connections";
    const token = await mintSession(t, a.secretKey, "conformance-user", 10);
    const run = async (method: string, init: Parameters<TestApp["call"]>[1], expected: number) => {
      const res = await t.call(p, { ...init, method: method.toUpperCase() });
      expect({ method, status: res.status, errors: await conformance(method, p, res) }).toEqual({ method, status: expected, errors: [] });
    };
    await run("get", { bearer: token }, 200); // not connected: null timestamps
    await run("post", { bearer: token, json: { monthlyUsd: 4 } }, 200);
    await run("get", { bearer: token }, 200); // connected
    await run("post", { bearer: token, json: { monthlyUsd: 0 } }, 400);
    await run("post", { bearer: token, json: { monthlyUsd: 11 } }, 400);
    await run("post", { bearer: token, json: "[]" }, 400);
    await run("post", { json: { monthlyUsd: 1 } }, 401);
    await run("post", { bearer: token, json: { monthlyUsd: 1 }, headers: { "content-length": "5000" } }, 413);
    await run("get", { bearer: a.secretKey }, 401);
    await run("delete", { bearer: token }, 204);
    await run("delete", { bearer: token }, 204);
    await run("delete", { bearer: "nope" }, 401);
  });

  test("GET /api/v1/status: 200 (connected and not), 400, 401", async () => {
    const a = await t.createClientApp();
    const token = await mintSession(t, a.secretKey, "s", 3);
    await t.call("/api/v1/connections", { method: "POST", bearer: token });
    const cases: Array<[string, Record<string, string>, number]> = [
      ["/api/v1/status?appUserId=s", { authorization: `Bearer ${a.secretKey}` }, 200],
      ["/api/v1/status?appUserId=never", { authorization: `Bearer ${a.secretKey}` }, 200],
      ["/api/v1/status", { authorization: `Bearer ${a.secretKey}` }, 400],
      ["/api/v1/status?appUserId=s", { authorization: `Bearer ${token}` }, 401],
      ["/api/v1/status?appUserId=s", {}, 401],
    ];
    for (const [url, headers, expected] of cases) {
      const res = await t.call(url, { headers });
      expect({ url, status: res.status, errors: await conformance("get", "/api/v1/status", res) }).toEqual({ url, status: expected, errors: [] });
    }
  });

  test("GET /healthz: 200 and 503", async () => {
    expect(await conformance("get", "/healthz", await t.call("/healthz"))).toEqual([]);
    const down = makeTestApp();
    await down.deps.store.close();
    const res = await down.call("/healthz");
    expect(res.status).toBe(503);
    expect(await conformance("get", "/healthz", res)).toEqual([]);
  });

  test("POST /api/v1/chat/completions: 200 as JSON and as an event stream, 400, 402 not_connected and budget_exceeded", async () => {
    const c = await chatTestApp();
    await c.connect("rich", 5);
    await c.connect("poor", 0.000001);
    const p = "/api/v1/chat/completions";
    const ask = { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hello there" }] };
    const json = await c.chat(ask, { "x-service-user": "rich" });
    expect({ status: json.status, errors: await conformance("post", p, json) }).toEqual({ status: 200, errors: [] });
    const stream = await c.chat({ ...ask, stream: true }, { "x-service-user": "rich" });
    expect(stream.status).toBe(200);
    const mediaType = stream.headers.get("content-type")!.split(";")[0]!;
    expect(Object.keys(operation("post", p).responses["200"].content)).toContain(mediaType);
    expect(mediaType).toBe("text/event-stream");
    expect((await stream.text()).trimEnd()).toEndWith("data: [DONE]");
    const refused: Array<[string, number, string]> = [
      ["poor", 402, "budget_exceeded"],
      ["nobody", 402, "not_connected"],
      ["", 400, "invalid_request"],
    ];
    for (const [user, status, code] of refused) {
      // An empty x-service-user names nobody: 400.
      const res = await c.chat(ask, { "x-service-user": user });
      const body = (await res.clone().json()) as Json;
      expect({ status: res.status, code: body.error.code, errors: await conformance("post", p, res) }).toEqual({ status, code, errors: [] });
      if (code === "budget_exceeded") expect(Object.keys(body.error).sort()).toEqual(["code", "limitUsd", "message", "remainingUsd", "resetsAt", "usedUsd"]);
    }
  });

  test("the validator is not vacuous: a wrong body fails against the same schemas", () => {
    expect(responseValidator("get", "/api/v1/status", 200)({ connected: "yes" })).toBe(false);
    expect(responseValidator("post", "/api/v1/sessions", 200)({ token: "x", expiresAt: "1700000000" })).toBe(false);
    expect(responseValidator("get", "/api/v1/connections", 401)({ message: "no" })).toBe(false);
    expect(responseValidator("get", "/api/v1/connections", 401)({ error: { code: "no_such_code", message: "no" } })).toBe(false);
    expect(responseValidator("get", "/api/v1/connections", 401)({ error: { code: "auth", message: "no" } })).toBe(true);
    expect(responseValidator("get", "/api/v1/connections", 200)({})).toBe(false);
  });
});
