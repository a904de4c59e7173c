/**
 * How the server client turns the service's error answers into typed errors: one class per
 * code (with the status from the service's own table), the budget numbers, Retry-After, the
 * request id; answers that are not the envelope; and `toProxyError` on ours, on the SDK's
 * wrapping of ours, and on the SDK's real APIError (chat-errors.test.ts: what the chat
 * client throws). A fake fetch answers here; tests/client/server.test.ts does it for real.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { APIConnectionError, APIError, OpenAIError } from "openai";
import {
  BudgetExceededError,
  createServerClient,
  ERROR_CODES,
  GrantInvalidError,
  ProxyError,
  RateLimitedError,
  toProxyError,
  UnexpectedResponseError,
} from "../../packages/client/src/server";
import { ERROR_STATUS } from "../../src/errors";
import { BUDGET, EXPECTED_CLASS } from "./expected-errors";

/** A client whose every call gets this one answer. */
function answering(status: number, body: string, headers: Record<string, string> = {}) {
  return createServerClient({
    baseUrl: "http://proxy.test",
    secretKey: "sk_live_test_key",
    fetch: async () => new Response(body, { status, headers: { "content-type": "application/json", ...headers } }),
  });
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected the call to fail");
}

describe("error answers become typed errors", () => {
  test.each([...ERROR_CODES])("%s: its class, with code, status, message and request id", async (code) => {
    const status = ERROR_STATUS[code];
    const body = JSON.stringify({ error: { code, message: `about ${code}` } });
    const err = await failure(answering(status, body, { "x-request-id": "req_1" }).getStatus("alice"));
    expect(err).toBeInstanceOf(EXPECTED_CLASS[code]);
    expect(err).toBeInstanceOf(ProxyError);
    expect(err).toMatchObject({ code, status, message: `about ${code}`, requestId: "req_1", name: EXPECTED_CLASS[code].name });
  });

  test("budget_exceeded carries the budget numbers; grant_invalid carries them when its cap refused", async () => {
    const budget = await failure(answering(402, JSON.stringify({ error: { code: "budget_exceeded", message: "m", ...BUDGET } })).getStatus("a"));
    expect(budget).toBeInstanceOf(BudgetExceededError);
    expect(budget).toMatchObject(BUDGET);
    const spent = await failure(answering(402, JSON.stringify({ error: { code: "grant_invalid", message: "m", ...BUDGET } })).getStatus("a"));
    expect((spent as GrantInvalidError).budget).toEqual(BUDGET);
    const expired = await failure(answering(402, JSON.stringify({ error: { code: "grant_invalid", message: "expired" } })).getStatus("a"));
    expect((expired as GrantInvalidError).budget).toBeNull();
  });

  test("Retry-After in seconds or as an HTTP date; null when absent", async () => {
    const body = JSON.stringify({ error: { code: "rate_limited", message: "slow down" } });
    expect(await failure(answering(429, body, { "retry-after": "17" }).getStatus("a"))).toMatchObject({ retryAfter: 17 });
    const inAMinute = new Date(Date.now() + 60_000).toUTCString();
    const dated = (await failure(answering(429, body, { "retry-after": inAMinute }).getStatus("a"))) as RateLimitedError;
    expect(dated.retryAfter).toBeGreaterThan(0);
    expect(dated.retryAfter).toBeLessThanOrEqual(60);
    expect(await failure(answering(429, body).getStatus("a"))).toMatchObject({ retryAfter: null });
  });

  test("an answer without the envelope, or with a code this client does not know: UnexpectedResponseError", async () => {
    const html = await failure(answering(502, "<html>Bad gateway</html>", { "x-request-id": "req_2" }).getStatus("a"));
    expect(html).toBeInstanceOf(UnexpectedResponseError);
    expect(html).not.toBeInstanceOf(ProxyError);
    expect(html).toMatchObject({ status: 502, requestId: "req_2", bodyStart: "<html>Bad gateway</html>" });
    const future = await failure(answering(418, JSON.stringify({ error: { code: "teapot", message: "m" } })).getStatus("a"));
    expect(future).toBeInstanceOf(UnexpectedResponseError);
  });
});

describe("toProxyError", () => {
  test("one of ours is returned as it is; one the SDK wrapped (its .stream() helper) is unwrapped from cause", async () => {
    const ours = await failure(answering(402, JSON.stringify({ error: { code: "not_connected", message: "m" } })).getStatus("a"));
    expect(toProxyError(ours)).toBe(ours as ProxyError);
    const wrapped = new OpenAIError("about not_connected");
    (wrapped as { cause?: unknown }).cause = ours;
    expect(toProxyError(wrapped)).toBe(ours as ProxyError);
  });

  test("the openai SDK's APIError for our envelope becomes our typed error", () => {
    const headers = new Headers({ "x-request-id": "req_3", "retry-after": "9" });
    const budget = APIError.generate(402, { error: { code: "budget_exceeded", message: "no budget", ...BUDGET } }, undefined, headers);
    const converted = toProxyError(budget);
    expect(converted).toBeInstanceOf(BudgetExceededError);
    expect(converted).toMatchObject({ code: "budget_exceeded", status: 402, message: "no budget", requestId: "req_3", ...BUDGET });
    const limited = APIError.generate(429, { error: { code: "rate_limited", message: "slow" } }, undefined, headers);
    expect(toProxyError(limited)).toMatchObject({ code: "rate_limited", retryAfter: 9 });
  });

  test("anything else is not ours: null", () => {
    expect(toProxyError(new APIConnectionError({ message: "refused" }))).toBeNull();
    expect(toProxyError(APIError.generate(500, { error: { message: "OpenAI's own" } }, undefined, new Headers()))).toBeNull();
    expect(toProxyError(new Error("boom"))).toBeNull();
    expect(toProxyError(undefined)).toBeNull();
  });
});

describe("the server entry refuses a browser", () => {
  afterEach(() => {
    delete (globalThis as { window?: unknown }).window;
  });

  test("createServerClient throws when globalThis.window is defined, and works once it is gone", () => {
    (globalThis as { window?: unknown }).window = {};
    expect(() => createServerClient({ baseUrl: "http://proxy.test", secretKey: "sk_live_x" })).toThrow(/must not run in a browser/);
    delete (globalThis as { window?: unknown }).window;
    expect(() => createServerClient({ baseUrl: "http://proxy.test", secretKey: "sk_live_x" })).not.toThrow();
  });
});

describe("chat() presets the openai client", () => {
  test("the proxy's /api/v1, the secret key, and x-service-user or x-service-grant", async () => {
    const seen: Request[] = [];
    const client = createServerClient({
      baseUrl: "http://proxy.test/",
      secretKey: "sk_live_test_key",
      fetch: async (input, init) => {
        seen.push(new Request(input instanceof Request ? input.url : String(input), init));
        return Response.json({ object: "list", data: [] });
      },
    });
    await client.chat({ user: "alice" }).models.list();
    await client.chat({ grant: "gt_abc" }, { maxRetries: 0 }).models.list();
    expect(seen.map((r) => r.url)).toEqual(["http://proxy.test/api/v1/models", "http://proxy.test/api/v1/models"]);
    expect(seen.map((r) => r.headers.get("authorization"))).toEqual(["Bearer sk_live_test_key", "Bearer sk_live_test_key"]);
    expect([seen[0]!.headers.get("x-service-user"), seen[0]!.headers.get("x-service-grant")]).toEqual(["alice", null]);
    expect([seen[1]!.headers.get("x-service-user"), seen[1]!.headers.get("x-service-grant")]).toEqual([null, "gt_abc"]);
  });

  test("neither or both payers: a TypeError before anything is sent", () => {
    const client = createServerClient({ baseUrl: "http://proxy.test", secretKey: "sk_live_x" });
    expect(() => client.chat({ user: "" })).toThrow(TypeError);
    expect(() => client.chat({ user: "a", grant: "b" } as never)).toThrow(/not both/);
  });
});
