/**
 * OpenRouter's own SDK (`@openrouter/sdk`) against a real proxy process in front of the mock
 * upstream: chat.send() as JSON and as a stream, models.list() (whole and paged), and the
 * proxy's errors read the way README.md ("OpenRouter's own SDK") says, from the SDK's base
 * error, because its typed error classes expect OpenRouter's integer `error.code`.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { HTTPClient, OpenRouter } from "@openrouter/sdk";
import { OpenRouterError, PaymentRequiredResponseError, ResponseValidationError, TooManyRequestsResponseError } from "@openrouter/sdk/models/errors";
import { startProxyStack, type ProxyStack } from "../../helpers/proxy-stack";
import {
  CHAT_RATE_LIMIT,
  DEFAULT_COMPLETION_TOKENS,
  MODEL,
  completionText,
  exhaustRateLimit,
  expectOneChargedCall,
  expectRateLimitedWithoutCharge,
  expectRefusedWithoutCharge,
  mark,
  recordingFetch,
  type RecordingFetch,
} from "./harness";

// Real server processes; bun's own default test timeout is 5 s.
setDefaultTimeout(60_000);

let stack: ProxyStack;
// Without fastRetry: the SDK must see the proxy's own Retry-After.
let recorder: RecordingFetch;

/** A client for one user, as an app backend would set it up: base URL, secret key, user header. */
function clientFor(user: string): OpenRouter {
  const httpClient = new HTTPClient({ fetcher: recorder.fetch });
  httpClient.addHook("beforeRequest", (request) => {
    request.headers.set("x-service-user", user);
    return request;
  });
  return new OpenRouter({ serverURL: stack.baseURL, apiKey: stack.secretKey, httpClient });
}

/** As README.md reads it: the status, Retry-After and our code, from the SDK's base error. */
function proxyErrorOf(err: unknown): { status: number; retryAfter: string | null; code: unknown; error: unknown } {
  if (!(err instanceof OpenRouterError)) throw err;
  const error = err.contentType.startsWith("application/json") ? JSON.parse(err.body).error : undefined;
  return { status: err.statusCode, retryAfter: err.headers.get("retry-after"), code: error?.code, error };
}

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected the call to fail");
}

beforeAll(async () => {
  stack = await startProxyStack({ env: { RL_CHAT_LIMIT: String(CHAT_RATE_LIMIT) } });
  recorder = recordingFetch();
  for (const user of ["json", "stream", "limited"]) await stack.connect(user, 5);
  // Enough for the prompt, not for a minimal completion of gpt-4o (as in openai.test.ts).
  await stack.connect("poor", 0.0001);
});

afterAll(async () => {
  await stack?.stop();
});

describe("@openrouter/sdk through the proxy", () => {
  test("chat.send (JSON): the SDK parses the answer; one ledger row at the upstream's cost", async () => {
    const before = await mark(stack, "json");
    const result = await clientFor("json").chat.send({ chatRequest: { model: MODEL, messages: [{ role: "user", content: "Say hi" }] } });
    if (!("choices" in result)) throw new Error("expected a JSON answer, not a stream");
    expect(result.choices[0]!.message.content).toBe(completionText(DEFAULT_COMPLETION_TOKENS));
    const { served } = await expectOneChargedCall(stack, before, { stream: false });
    expect(result.id).toBe(served.id);
    expect(result.usage).toMatchObject({ promptTokens: served.promptTokens, completionTokens: served.completionTokens });
  });

  test("chat.send (stream): every chunk parses, the last carries the usage; one ledger row", async () => {
    const before = await mark(stack, "stream");
    const stream = await clientFor("stream").chat.send({
      chatRequest: { model: MODEL, messages: [{ role: "user", content: "Say hi" }], stream: true, streamOptions: { includeUsage: true } },
    });
    if ("choices" in stream) throw new Error("expected a stream, not a JSON answer");
    let text = "";
    let usage: unknown;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      usage = chunk.usage ?? usage;
    }
    expect(text).toBe(completionText(DEFAULT_COMPLETION_TOKENS));
    const { served } = await expectOneChargedCall(stack, before, { stream: true });
    expect(usage).toMatchObject({ promptTokens: served.promptTokens, completionTokens: served.completionTokens });
  });

  test("models.list(): the whole catalogue in one page, with its count", async () => {
    const pages = [];
    for await (const page of await clientFor("json").models.list()) pages.push(page.result);
    expect(pages).toHaveLength(1);
    expect(pages[0]!.data.map((m) => m.id)).toEqual(stack.mock.models.map((m) => m.id));
    expect(pages[0]!.totalCount).toBe(stack.mock.models.length);
    expect(pages[0]!.links.next).toBeNull();
  });

  test("models.list({ limit }): the SDK pages by offset through the whole catalogue, each model once", async () => {
    const ids: string[] = [];
    for await (const page of await clientFor("json").models.list({ limit: 2 })) ids.push(...page.result.data.map((m) => m.id));
    expect(ids).toEqual(stack.mock.models.map((m) => m.id));
  });

  test("budget exceeded: 402 and our code read from the SDK's base error; tried once, nothing charged", async () => {
    const before = await mark(stack, "poor");
    const from = recorder.attempts.length;
    const err = await caught(clientFor("poor").chat.send({ chatRequest: { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi ".repeat(40) }] } }));
    // OpenRouter's typed 402 class wants an integer error.code; ours is a string, so the SDK
    // says its validation failed, on the same base class with the status, headers and body.
    expect(err).toBeInstanceOf(ResponseValidationError);
    expect(err).not.toBeInstanceOf(PaymentRequiredResponseError);
    const proxyError = proxyErrorOf(err);
    expect(proxyError).toMatchObject({ status: 402, code: "budget_exceeded", error: { limitUsd: 0.0001, usedUsd: 0, remainingUsd: 0.0001 } });
    await expectRefusedWithoutCharge(stack, before, recorder.since(from));
  });

  test("rate limited: 429 with Retry-After and our code from the base error; the SDK does not retry it, nothing charged", async () => {
    await exhaustRateLimit(stack, "limited");
    const before = await mark(stack, "limited");
    const from = recorder.attempts.length;
    const err = await caught(clientFor("limited").chat.send({ chatRequest: { model: MODEL, messages: [{ role: "user", content: "hi" }] } }));
    expect(err).toBeInstanceOf(ResponseValidationError);
    expect(err).not.toBeInstanceOf(TooManyRequestsResponseError);
    const proxyError = proxyErrorOf(err);
    expect(proxyError).toMatchObject({ status: 429, code: "rate_limited" });
    expect(Number(proxyError.retryAfter)).toBeGreaterThanOrEqual(1);
    // The SDK retries only 5XX by default: one attempt.
    expect(await expectRateLimitedWithoutCharge(stack, before, recorder.since(from))).toBe(1);
  });
});
