/**
 * JSON bodies past their structural bounds are refused with 400 on every kind of route, after
 * authentication and before validation (src/http/json-body.ts), whether the body declared
 * its length or came chunked, and form bodies are refused the same way. The hostile shapes
 * against a real server process, with /healthz timed throughout, are in
 * tests/security/hostile-bodies.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { MAX_JSON_DEPTH, MAX_JSON_VALUES } from "../../src/http/json-bounds";
import { chatTestApp } from "../helpers/chat-app";
import { ADMIN, ADMIN_TOKEN, makeAdminTestApp } from "../helpers/admin";
import { expectError, expectOk } from "../helpers/expect";
import { heavyChatRequest } from "../helpers/heavy-chat-request";

const TOO_DEEP = `request body nests deeper than ${MAX_JSON_DEPTH} levels`;
const TOO_MANY = `request body holds more than ${MAX_JSON_VALUES} JSON values`;

/** `levels` arrays nested in each other: `[[[...]]]`. */
const nested = (levels: number) => "[".repeat(levels) + "]".repeat(levels);
/** The outside review's body: messages[0].content of 10^5 `[` then 10^5 `]`. */
const reviewBody = `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":${nested(100_000)}}]}`;
const manyValues = (json: string, at: string) => json.replace(at, "[" + Array(MAX_JSON_VALUES).fill("0").join(",") + "]");

/** The same body as a stream: the request declares no length (chunked on the wire). */
function undeclared(text: string): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  return new ReadableStream({
    start(controller) {
      for (let at = 0; at < bytes.length; at += 16 * 1024) controller.enqueue(bytes.subarray(at, at + 16 * 1024));
      controller.close();
    },
  });
}

async function chatApp() {
  const t = await chatTestApp({ env: { RL_CHAT_LIMIT: "100000", RL_SESSIONS_LIMIT: "100000" } });
  await t.connect("alice", 5);
  const post = (path: string, body: string | Uint8Array | ReadableStream<Uint8Array>, headers: Record<string, string> = {}) =>
    t.app.handle(
      new Request(`http://localhost/api/v1${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${t.secretKey}`, "content-type": "application/json", "x-service-user": "alice", ...headers },
        body,
      }),
    );
  /** A session token for `appUserId` that may approve up to $5. */
  const session = async (appUserId: string) => {
    const res = await post("/sessions", JSON.stringify({ appUserId, requestLimit: { monthlyUsd: 5 } }));
    return (await expectOk<{ token: string }>(res)).token;
  };
  return { ...t, post, session };
}

describe("bodies past the structural bounds", () => {
  test("the review's body (10^5 levels in messages[0].content) is 400 naming the bound, not a 500 after seconds", async () => {
    const t = await chatApp();
    await expectError(await t.post("/chat/completions", reviewBody), 400, "invalid_request", TOO_DEEP);
    await expectError(await t.post("/chat/completions", undeclared(reviewBody)), 400, "invalid_request", TOO_DEEP);
    expect(t.mock.served).toEqual([]);
    expect(t.logs.filter((l) => l.includes('"level":"error"'))).toEqual([]);
  });

  test("too many values is 400 naming the bound, declared or chunked", async () => {
    const t = await chatApp();
    const body = manyValues('{"appUserId":"alice","x":X}', "X");
    await expectError(await t.post("/sessions", body), 400, "invalid_request", TOO_MANY);
    await expectError(await t.post("/sessions", undeclared(body)), 400, "invalid_request", TOO_MANY);
  });

  test("a chunked body over MAX_BODY_BYTES is still 413, also where the body is optional: the byte limit cuts it before the scan", async () => {
    const t = await chatTestApp({ env: { MAX_BODY_BYTES: "4096", RL_SESSIONS_LIMIT: "100000" } });
    const post = async (path: string, bearer: string) =>
      t.app.handle(
        new Request(`http://localhost/api/v1${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
          body: undeclared(nested(10_000)),
        }),
      );
    await expectError(await post("/sessions", t.secretKey), 413, "payload_too_large");
    const session = await t.app.handle(
      new Request("http://localhost/api/v1/sessions", {
        method: "POST",
        headers: { authorization: `Bearer ${t.secretKey}`, "content-type": "application/json" },
        body: JSON.stringify({ appUserId: "dave" }),
      }),
    );
    await expectError(await post("/connections", (await expectOk<{ token: string }>(session)).token), 413, "payload_too_large");
  });

  test("an optional body (POST /connections) past a bound is refused, not read as no body", async () => {
    const t = await chatApp();
    const token = await t.session("bob");
    const res = await t.app.handle(
      new Request("http://localhost/api/v1/connections", {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: `{"monthlyUsd":1,"x":${nested(MAX_JSON_DEPTH + 1)}}`,
      }),
    );
    await expectError(res, 400, "invalid_request", TOO_DEEP);
    expect(await t.deps.store.connections.find(t.appId, "bob")).toBeNull();
  });

  test("admin routes are bounded too", async () => {
    const t = makeAdminTestApp();
    await expectError(await t.admin("/apps", { json: `{"name":"a","x":${nested(MAX_JSON_DEPTH + 1)}}` }), 400, "invalid_request", TOO_DEEP);
    await expectError(await t.admin("/apps", { json: manyValues('{"name":"a","x":X}', "X") }), 400, "invalid_request", TOO_MANY);
    expect(await t.deps.store.apps.count()).toBe(0);
  });

  test("strangers' bodies are not read: a wrong credential is 401 whatever the body", async () => {
    const t = await chatApp();
    for (const path of ["/chat/completions", "/sessions"]) {
      await expectError(await t.post(path, reviewBody, { authorization: `Bearer ${t.secretKey}x` }), 401, "auth");
    }
    const admin = makeAdminTestApp();
    await expectError(await admin.admin("/apps", { bearer: `${ADMIN_TOKEN}x`, json: reviewBody }), 401, "auth");
    await expectError(await admin.call(`${ADMIN}/apps`, { bearer: `${ADMIN_TOKEN}x`, json: reviewBody }), 401, "auth");
  });
});

describe("bodies within the bounds", () => {
  test(`a tool schema nested to the bound (${MAX_JSON_DEPTH} levels) is served; one level more is refused`, async () => {
    const t = await chatApp();
    // The body itself, its tools array and the tool object take 3 levels.
    const body = (levels: number) =>
      `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"tools":[{"x":${nested(levels - 3)}}]}`;
    await expectOk(await t.post("/chat/completions", body(MAX_JSON_DEPTH)));
    await expectError(await t.post("/chat/completions", body(MAX_JSON_DEPTH + 1)), 400, "invalid_request", TOO_DEEP);
  });

  test("a heavy real request (2,048 messages, 128 tools: 41k values) is served", async () => {
    const t = await chatApp();
    const res = await t.post("/chat/completions", JSON.stringify(heavyChatRequest()));
    expect((await expectOk(res)).object).toBe("chat.completion");
  });
});

describe("form bodies", () => {
  const form = () => {
    const data = new FormData();
    data.set("appUserId", nested(100_000));
    return data;
  };

  test("multipart and urlencoded bodies are refused: Elysia would JSON-parse their fields unbounded", async () => {
    const t = await chatApp();
    const headers = { authorization: `Bearer ${t.secretKey}` };
    const multipart = await t.app.handle(new Request("http://localhost/api/v1/sessions", { method: "POST", headers, body: form() }));
    await expectError(multipart, 400, "invalid_request", "request body must be JSON (content-type application/json), not multipart/form-data");
    const urlencoded = await t.app.handle(
      new Request("http://localhost/api/v1/sessions", { method: "POST", headers, body: new URLSearchParams({ appUserId: "alice" }) }),
    );
    await expectError(urlencoded, 400, "invalid_request", /not application\/x-www-form-urlencoded$/);
  });

  test("where the body is optional (POST /connections) too: Elysia's own parse error after the refusal does not replace it", async () => {
    const t = await chatApp();
    const token = await t.session("erin");
    const res = await t.app.handle(
      new Request("http://localhost/api/v1/connections", { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form() }),
    );
    await expectError(res, 400, "invalid_request", /^request body must be JSON \(content-type application\/json\), not multipart\/form-data$/);
    expect(await t.deps.store.connections.find(t.appId, "erin")).toBeNull();
  });

  test("a stranger's form body is 401, not 400", async () => {
    const t = await chatApp();
    const res = await t.app.handle(
      new Request("http://localhost/api/v1/sessions", { method: "POST", headers: { authorization: "Bearer sk_live_x_y" }, body: form() }),
    );
    await expectError(res, 401, "auth");
  });
});

describe("odd values within the bounds answer 4xx or 2xx, never 5xx", () => {
  const cases: Array<[string, string | Uint8Array]> = [
    ["1e999 (Infinity) as max_tokens", '{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":1e999}'],
    ["1e999 in a passed-through field", '{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"temperature":1e999}'],
    ["-0 as max_tokens", '{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":-0}'],
    ["a lone surrogate", '{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"\\ud800"}],"max_tokens":5}'],
    ["duplicate keys", '{"model":"x","model":"openai/gpt-4o-mini","messages":[],"messages":[{"role":"user","content":"hi"}],"max_tokens":5}'],
    [
      "invalid UTF-8",
      new Uint8Array([
        ...new TextEncoder().encode('{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"'),
        0xc0,
        0xff,
        0xed,
        0xa0,
        0x80,
        ...new TextEncoder().encode('"}],"max_tokens":5}'),
      ]),
    ],
  ];
  for (const [name, body] of cases) {
    test(name, async () => {
      const t = await chatApp();
      const res = await t.post("/chat/completions", body);
      const text = await res.text();
      expect({ status: res.status < 500 ? "below 500" : res.status, text }).toEqual({ status: "below 500", text });
      expect(t.logs.filter((l) => l.includes('"level":"error"'))).toEqual([]);
    });
  }
});

describe("a body that is not JSON", () => {
  test("is 400 saying it is not valid JSON and what the parser met, on the service's routes and the model routes alike", async () => {
    const t = await chatApp();
    const cases: Array<[string, string, string]> = [
      ["/sessions", '{"appUserId":"a",}', "request body is not valid JSON: Property name must be a string literal"],
      ["/sessions", '{"appUserId":"a"', "request body is not valid JSON: Expected '}'"],
      ["/chat/completions", '{"model":"openai/gpt-4o-mini","messages":[', "request body is not valid JSON: Unexpected EOF"],
      ["/connections", "{oops}", "request body is not valid JSON: Expected '}'"],
    ];
    for (const [path, body, message] of cases) {
      const error = await expectError(
        await t.post(path, body, path === "/connections" ? { authorization: `Bearer ${await t.session("bob")}` } : {}),
        400,
        "invalid_request",
      );
      expect({ path, body, message: error.message }).toEqual({ path, body, message });
    }
    expect(t.mock.served).toEqual([]);
  });

  test("never quotes the body back: a secret typed without quotes stays out of the answer", async () => {
    const t = await chatApp();
    const error = await expectError(await t.post("/sessions", '{"appUserId": sk_live_app0_secret}'), 400, "invalid_request");
    expect(error.message).toBe("request body is not valid JSON: Unexpected identifier");
  });
});
