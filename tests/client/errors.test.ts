/**
 * How the server client turns the service's error answers into typed errors: one class per
 * code (with the status from the service's own table), the budget numbers, Retry-After, the
 * request id; answers that are not the envelope; the same classes thrown by the `openai`
 * client of chat(), JSON and streamed, with the SDK's retries kept; and `toProxyError` on
 * the SDK's real APIError. A fake fetch answers here; tests/client/server.test.ts does it
 * for real.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { APIConnectionError, APIError, OpenAIError } from "openai";
import {
  AuthError,
  BudgetExceededError,
  createServerClient,
  ERROR_CODES,
  FundingInvalidError,
  GrantInvalidError,
  IdempotencyConflictError,
  IdempotencyMismatchError,
  InternalError,
  InvalidRequestError,
  NotConnectedError,
  NotFoundError,
  PayloadTooLargeError,
  ProxyError,
  RateLimitedError,
  toProxyError,
  UnavailableError,
  UnexpectedResponseError,
  UpstreamError,
  type ErrorCode,
} from "../../packages/client/src/server";
import { ERROR_STATUS } from "../../src/errors";

const EXPECTED_CLASS: Record<ErrorCode, abstract new (...args: never[]) => ProxyError> = {
  invalid_request: InvalidRequestError,
  auth: AuthError,
  not_connected: NotConnectedError,
  budget_exceeded: BudgetExceededError,
  grant_invalid: GrantInvalidError,
  funding_invalid: FundingInvalidError,
  not_found: NotFoundError,
  idempotency_conflict: IdempotencyConflictError,
  payload_too_large: PayloadTooLargeError,
  idempotency_mismatch: IdempotencyMismatchError,
  rate_limited: RateLimitedError,
  internal: InternalError,
  upstream: UpstreamError,
  unavailable: UnavailableError,
};

const BUDGET = { limitUsd: 5, usedUsd: 4.5, remainingUsd: 0.25, resetsAt: "2026-02-01T00:00:00.000Z" };

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

/** A client whose every call gets the answers in turn (the last one again when they run out), counting the calls. */
function answeringInTurn(answers: Array<() => Response>) {
  let calls = 0;
  const client = createServerClient({
    baseUrl: "http://proxy.test",
    secretKey: "sk_live_test_key",
    fetch: async () => answers[Math.min(calls++, answers.length - 1)]!(),
  });
  return { client, calls: () => calls };
}

const envelope =
  (code: ErrorCode, headers: Record<string, string> = {}, details: object = {}) =>
  () =>
    new Response(JSON.stringify({ error: { code, message: `about ${code}`, ...details } }), {
      status: ERROR_STATUS[code],
      headers: { "content-type": "application/json", "x-request-id": "req_chat", ...headers },
    });

const HELLO = { model: "openai/gpt-4o-mini", messages: [{ role: "user" as const, content: "hi" }] };

describe("chat() throws the service's error answers as our classes", () => {
  test.each([...ERROR_CODES])("%s: its class from create(), JSON and streamed", async (code) => {
    const { client } = answeringInTurn([envelope(code)]);
    const openai = client.chat({ user: "alice" }, { maxRetries: 0 });
    for (const stream of [false, true]) {
      const err = await failure(openai.chat.completions.create({ ...HELLO, stream }));
      expect(err).toBeInstanceOf(EXPECTED_CLASS[code]);
      expect(err).toMatchObject({ code, status: ERROR_STATUS[code], message: `about ${code}`, requestId: "req_chat" });
    }
  });

  test("budget numbers and Retry-After come through the SDK", async () => {
    const budget = await failure(
      answeringInTurn([envelope("budget_exceeded", {}, BUDGET)])
        .client.chat({ user: "a" })
        .chat.completions.create(HELLO),
    );
    expect(budget).toBeInstanceOf(BudgetExceededError);
    expect(budget).toMatchObject(BUDGET);
    const limited = answeringInTurn([envelope("rate_limited", { "retry-after": "7" })]).client.chat({ user: "a" }, { maxRetries: 0 });
    expect(await failure(limited.chat.completions.create(HELLO))).toMatchObject({ code: "rate_limited", retryAfter: 7 });
  });

  test("the SDK still retries what it retries (429, 5xx), and throws ours once it gives up", async () => {
    const limited = answeringInTurn([envelope("rate_limited", { "retry-after": "0" })]);
    const err = await failure(limited.client.chat({ user: "a" }, { maxRetries: 2 }).chat.completions.create(HELLO));
    expect(err).toBeInstanceOf(RateLimitedError);
    expect(limited.calls()).toBe(3);
    const recovered = answeringInTurn([envelope("upstream", { "retry-after": "0" }), () => Response.json({ object: "list", data: [] })]);
    await recovered.client.chat({ user: "a" }, { maxRetries: 1 }).models.list();
    expect(recovered.calls()).toBe(2);
  });

  test("an answer without our envelope stays the SDK's APIError; a connection failure the SDK's APIConnectionError", async () => {
    const html = await failure(
      answeringInTurn([() => new Response("<html>Bad gateway</html>", { status: 502 })])
        .client.chat({ user: "a" }, { maxRetries: 0 })
        .chat.completions.create(HELLO),
    );
    expect(html).toBeInstanceOf(APIError);
    expect(html).toMatchObject({ status: 502 });
    expect(toProxyError(html)).toBeNull();
    const refused = createServerClient({
      baseUrl: "http://proxy.test",
      secretKey: "sk_live_x",
      fetch: async () => {
        throw new TypeError("fetch failed");
      },
    });
    const err = await failure(refused.chat({ user: "a" }, { maxRetries: 0 }).chat.completions.create(HELLO));
    expect(err).toBeInstanceOf(APIConnectionError);
  });
});

describe("toProxyError", () => {
  test("one of ours is returned as it is; one the SDK wrapped (its .stream() helper) is unwrapped from cause", async () => {
    const ours = await failure(answeringInTurn([envelope("not_connected")]).client.getStatus("a"));
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
