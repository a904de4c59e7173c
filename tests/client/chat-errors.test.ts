/**
 * The `openai` client of chat() throws the service's error answers as the library's classes,
 * from create() JSON and streamed, with the budget numbers and Retry-After; the SDK's own
 * retries are kept; what is not our envelope stays the SDK's. A fake fetch answers here;
 * tests/client/server.test.ts and the pack tests do it against a real server.
 */
import { describe, expect, test } from "bun:test";
import { APIConnectionError, APIError } from "openai";
import { BudgetExceededError, createServerClient, ERROR_CODES, RateLimitedError, toProxyError, type ErrorCode } from "../../packages/client/src/server";
import { ERROR_STATUS } from "../../src/errors";
import { BUDGET, EXPECTED_CLASS } from "./expected-errors";

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected the call to fail");
}

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
