/**
 * `@langchain/openai`'s ChatOpenAI against a real proxy process: invoke() and stream()
 * complete with usage_metadata, and the errors it surfaces leave no charge behind.
 *
 * LangChain does its own retrying (@langchain/core AsyncCaller: 6 retries by default, with
 * a randomised exponential back-off from 1 s that ignores retry-after headers) and builds
 * its openai client with maxRetries 0. 4xx such as 402 are never retried; a 429 is retried
 * after max(back-off, Retry-After), so with the proxy's Retry-After of up to 60 s the default
 * can block for minutes. The 5xx and 429 tests set maxRetries: 1 so that the retry is
 * observed in seconds.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { ChatOpenAI } from "@langchain/openai";
import type { AIMessageChunk } from "@langchain/core/messages";
import { APIError } from "openai";
import { startProxyStack, type ProxyStack } from "../../helpers/proxy-stack";
import {
  CHAT_RATE_LIMIT,
  DEFAULT_COMPLETION_TOKENS,
  MODEL,
  completionText,
  expectOneChargedCall,
  exhaustRateLimit,
  expectRateLimitedWithoutCharge,
  expectRefusedWithoutCharge,
  expectUpstreamFailureWithoutCharge,
  mark,
  recordingFetch,
  type RecordingFetch,
} from "./harness";

// Real server processes; bunfig.toml's [test] timeout is not a key bun reads (its default is 5 s).
setDefaultTimeout(60_000);

let stack: ProxyStack;
let recorder: RecordingFetch;

function chatFor(user: string, options: { model?: string; maxRetries?: number } = {}): ChatOpenAI {
  return new ChatOpenAI({
    model: options.model ?? MODEL,
    apiKey: stack.secretKey,
    maxRetries: options.maxRetries,
    configuration: { baseURL: stack.baseURL, defaultHeaders: { "x-service-user": user }, fetch: recorder.fetch },
  });
}

async function caught(promise: Promise<unknown>): Promise<APIError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof APIError) return err;
    throw err;
  }
  throw new Error("expected the call to fail");
}

async function drain(stream: AsyncIterable<AIMessageChunk>): Promise<AIMessageChunk | undefined> {
  let all: AIMessageChunk | undefined;
  for await (const chunk of stream) all = all ? all.concat(chunk) : chunk;
  return all;
}

beforeAll(async () => {
  stack = await startProxyStack({ env: { RL_CHAT_LIMIT: String(CHAT_RATE_LIMIT) } });
  recorder = recordingFetch({ fastRetry: true });
  for (const user of ["json", "stream", "upstream-500", "upstream-500-stream", "limited"]) await stack.connect(user, 5);
  await stack.connect("poor", 0.0001);
});

afterAll(async () => {
  await stack?.stop();
});

describe("@langchain/openai ChatOpenAI through the proxy", () => {
  test("invoke(): the message, usage_metadata, one ledger row at the upstream's cost", async () => {
    const before = await mark(stack, "json");
    const message = await chatFor("json").invoke("Say hi");
    expect(message.content).toBe(completionText(DEFAULT_COMPLETION_TOKENS));
    const { served } = await expectOneChargedCall(stack, before, { stream: false });
    expect(message.id).toBe(served.id);
    expect(message.usage_metadata).toMatchObject({ input_tokens: served.promptTokens, output_tokens: served.completionTokens });
  });

  test("stream(): every chunk, and usage_metadata on the concatenated message", async () => {
    const before = await mark(stack, "stream");
    const message = await drain(await chatFor("stream").stream("Say hi"));
    expect(message?.content).toBe(completionText(DEFAULT_COMPLETION_TOKENS));
    const { served } = await expectOneChargedCall(stack, before, { stream: true });
    expect(message?.usage_metadata).toMatchObject({ input_tokens: served.promptTokens, output_tokens: served.completionTokens });
  });

  test("a user with no connection: openai APIError 402 not_connected, not retried, nothing charged", async () => {
    const before = await mark(stack, "stranger");
    let from = recorder.attempts.length;
    const err = await caught(chatFor("stranger").invoke("hi"));
    expect(err.status).toBe(402);
    expect(err.code).toBe("not_connected");
    await expectRefusedWithoutCharge(stack, before, recorder.since(from));

    from = recorder.attempts.length;
    const streamed = await caught(chatFor("stranger").stream("hi").then(drain));
    expect(streamed.status).toBe(402);
    await expectRefusedWithoutCharge(stack, before, recorder.since(from));
  });

  test("a budget too small: 402 budget_exceeded, not retried, nothing charged", async () => {
    const before = await mark(stack, "poor");
    const from = recorder.attempts.length;
    const err = await caught(chatFor("poor", { model: "openai/gpt-4o" }).invoke("hi ".repeat(40)));
    expect(err.status).toBe(402);
    expect(err.code).toBe("budget_exceeded");
    await expectRefusedWithoutCharge(stack, before, recorder.since(from));
  });

  test("an upstream 500 (invoke): 502 after LangChain's retry, every attempt free", async () => {
    const before = await mark(stack, "upstream-500");
    const from = recorder.attempts.length;
    const err = await caught(chatFor("upstream-500", { maxRetries: 1 }).invoke("hi [[mock status=500]]"));
    expect(err.status).toBe(502);
    expect(err.code).toBe("upstream");
    expect(await expectUpstreamFailureWithoutCharge(stack, before, recorder.since(from))).toBe(2);
  });

  test("an upstream 500 (stream): 502 after LangChain's retry, every attempt free", async () => {
    const before = await mark(stack, "upstream-500-stream");
    const from = recorder.attempts.length;
    const err = await caught(chatFor("upstream-500-stream", { maxRetries: 1 }).stream("hi [[mock status=500]]").then(drain));
    expect(err.status).toBe(502);
    expect(await expectUpstreamFailureWithoutCharge(stack, before, recorder.since(from))).toBe(2);
  });

  test("rate limited (RL_CHAT): 429 rate_limited after LangChain's retry, nothing charged", async () => {
    await exhaustRateLimit(stack, "limited");
    const before = await mark(stack, "limited");
    const from = recorder.attempts.length;
    const err = await caught(chatFor("limited", { maxRetries: 1 }).invoke("hi"));
    expect(err.status).toBe(429);
    expect(err.code).toBe("rate_limited");
    expect(await expectRateLimitedWithoutCharge(stack, before, recorder.since(from))).toBe(2);
  });
});
