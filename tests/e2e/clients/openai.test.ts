/**
 * The official `openai` SDK against a real proxy process in front of the mock upstream:
 * create() with and without `stream`, the `.stream()` helper, and the errors it surfaces,
 * each checked against the proxy's own ledger.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import OpenAI, { APIError } from "openai";
import { E2E_UPSTREAM_KEY, startProxyStack, type ProxyStack } from "../../helpers/proxy-stack";
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

/** A client for one user, configured as an app backend would: base URL, secret key, user header. */
function clientFor(user: string): OpenAI {
  return new OpenAI({
    baseURL: stack.baseURL,
    apiKey: stack.secretKey,
    defaultHeaders: { "x-service-user": user },
    fetch: recorder.fetch,
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

beforeAll(async () => {
  stack = await startProxyStack({ env: { RL_CHAT_LIMIT: String(CHAT_RATE_LIMIT) } });
  recorder = recordingFetch({ fastRetry: true });
  for (const user of ["json", "stream", "stream-default", "helper", "upstream-500", "upstream-500-stream", "limited"]) await stack.connect(user, 5);
  // Enough for the prompt, not for a minimal completion of gpt-4o (see planReservation).
  await stack.connect("poor", 0.0001);
});

afterAll(async () => {
  await stack?.stop();
});

describe("openai SDK through the proxy", () => {
  test("chat.completions.create (JSON): the answer, its usage, one ledger row at the upstream's cost", async () => {
    const before = await mark(stack, "json");
    const completion = await clientFor("json").chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Say hi" }] });
    expect(completion.choices[0]!.message.content).toBe(completionText(DEFAULT_COMPLETION_TOKENS));
    const { served, row } = await expectOneChargedCall(stack, before, { stream: false });
    expect(completion.id).toBe(served.id);
    expect(completion.usage).toMatchObject({ prompt_tokens: served.promptTokens, completion_tokens: served.completionTokens });
    // The SDK exposes our x-request-id, which is the ledger row's key.
    expect(completion._request_id).toBe(row.requestId);
    // The upstream got the operator's key, never the app's secret key.
    expect(served.headers["authorization"]).toBe(`Bearer ${E2E_UPSTREAM_KEY}`);
  });

  test("chat.completions.create (stream, include_usage): every chunk, then a final usage chunk", async () => {
    const before = await mark(stack, "stream");
    const stream = await clientFor("stream").chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Say hi" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      text += chunk.choices[0]?.delta.content ?? "";
    }
    expect(text).toBe(completionText(DEFAULT_COMPLETION_TOKENS));
    const { served } = await expectOneChargedCall(stack, before, { stream: true });
    const last = chunks[chunks.length - 1]!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({ prompt_tokens: served.promptTokens, completion_tokens: served.completionTokens });
  });

  test("a stream without stream_options still ends with usage: the proxy always asks the upstream for it", async () => {
    const before = await mark(stack, "stream-default");
    const stream = await clientFor("stream-default").chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Say hi" }], stream: true });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const { served } = await expectOneChargedCall(stack, before, { stream: true });
    expect(served.body).toMatchObject({ stream_options: { include_usage: true }, usage: { include: true } });
    expect(chunks[chunks.length - 1]!.usage).toMatchObject({ completion_tokens: served.completionTokens });
  });

  test("the .stream() helper: content events and finalChatCompletion() with usage", async () => {
    const before = await mark(stack, "helper");
    const stream = clientFor("helper").chat.completions.stream({
      model: MODEL,
      messages: [{ role: "user", content: "Say hi" }],
      stream_options: { include_usage: true },
    });
    let deltas = "";
    stream.on("content", (delta) => {
      deltas += delta;
    });
    const final = await stream.finalChatCompletion();
    expect(deltas).toBe(completionText(DEFAULT_COMPLETION_TOKENS));
    expect(final.choices[0]!.message.content).toBe(deltas);
    const { served } = await expectOneChargedCall(stack, before, { stream: true });
    expect(final.id).toBe(served.id);
    expect(final.usage).toMatchObject({ prompt_tokens: served.promptTokens, completion_tokens: served.completionTokens });
  });

  test("a user with no connection: APIError 402 with code not_connected, tried once, nothing charged", async () => {
    const before = await mark(stack, "stranger");
    const from = recorder.attempts.length;
    const err = await caught(clientFor("stranger").chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] }));
    expect(err.status).toBe(402);
    expect(err.code).toBe("not_connected");
    await expectRefusedWithoutCharge(stack, before, recorder.since(from));
  });

  test("a budget too small for a minimal completion: APIError 402 budget_exceeded with the numbers", async () => {
    const before = await mark(stack, "poor");
    const from = recorder.attempts.length;
    const err = await caught(
      clientFor("poor").chat.completions.create({ model: "openai/gpt-4o", messages: [{ role: "user", content: "hi ".repeat(40) }], stream: true }),
    );
    expect(err.status).toBe(402);
    expect(err.code).toBe("budget_exceeded");
    expect(err.error).toMatchObject({ limitUsd: 0.0001, usedUsd: 0, remainingUsd: 0.0001 });
    await expectRefusedWithoutCharge(stack, before, recorder.since(from));
  });

  test("an upstream 500 (JSON): APIError 502; the SDK's retries each cost nothing", async () => {
    const before = await mark(stack, "upstream-500");
    const from = recorder.attempts.length;
    const err = await caught(
      clientFor("upstream-500").chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi [[mock status=500]]" }] }),
    );
    expect(err.status).toBe(502);
    expect(err.code).toBe("upstream");
    const attempts = await expectUpstreamFailureWithoutCharge(stack, before, recorder.since(from));
    // openai retries 5xx twice by default (maxRetries 2).
    expect(attempts).toBe(3);
  });

  test("an upstream 500 (stream): APIError 502 before any chunk; retries cost nothing", async () => {
    const before = await mark(stack, "upstream-500-stream");
    const from = recorder.attempts.length;
    const err = await caught(
      clientFor("upstream-500-stream").chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "hi [[mock status=500]]" }],
        stream: true,
      }),
    );
    expect(err.status).toBe(502);
    expect(err.code).toBe("upstream");
    expect(await expectUpstreamFailureWithoutCharge(stack, before, recorder.since(from))).toBe(3);
  });

  test("rate limited (RL_CHAT): RateLimitError 429 rate_limited; the SDK's retries are refused too, nothing charged", async () => {
    await exhaustRateLimit(stack, "limited");
    const before = await mark(stack, "limited");
    const from = recorder.attempts.length;
    const err = await caught(clientFor("limited").chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }], stream: true }));
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect(err.status).toBe(429);
    expect(err.code).toBe("rate_limited");
    // openai retries 429 twice by default, after waiting what Retry-After says.
    expect(await expectRateLimitedWithoutCharge(stack, before, recorder.since(from))).toBe(3);
  });

  test("models.list(): the upstream's catalogue, the ids a chat call may name", async () => {
    const ids: string[] = [];
    for await (const model of clientFor("json").models.list()) ids.push(model.id);
    expect(ids).toContain(MODEL);
    expect(ids).toEqual(stack.mock.models.map((m) => m.id));
  });

  test("an unknown model: APIError 400 invalid_request, not retried, nothing sent upstream", async () => {
    const from = recorder.attempts.length;
    const servedBefore = stack.mock.served.length;
    const err = await caught(clientFor("json").chat.completions.create({ model: "nobody/nothing", messages: [{ role: "user", content: "hi" }] }));
    expect(err.status).toBe(400);
    expect(err.code).toBe("invalid_request");
    expect(recorder.since(from)).toHaveLength(1);
    expect(stack.mock.served.length).toBe(servedBefore);
  });
});
