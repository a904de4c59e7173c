/**
 * The Vercel AI SDK (`ai`) through the proxy, run once per provider package
 * (@ai-sdk/openai-compatible, @openrouter/ai-sdk-provider): generateText and streamText
 * complete and see usage; 402 and 502 surface as errors; retries never charge.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { APICallError, RetryError, generateText, streamText, type LanguageModel } from "ai";
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

export interface ProviderUnderTest {
  /** The package name, for test titles. */
  name: string;
  /** A chat model for `modelId` that calls `baseURL` with the app's key, the user header and `fetch`. */
  model(config: { baseURL: string; apiKey: string; user: string; fetch: typeof fetch }, modelId: string): LanguageModel;
  /** The cost the provider reports in providerMetadata, when it reports one. */
  reportedCost?(providerMetadata: unknown): number | undefined;
}

/** The `{error: {code}}` our proxy answered with, as the AI SDK kept it on an APICallError. */
function proxyErrorCode(err: APICallError): string | undefined {
  const fromData = (err.data as { error?: { code?: string } } | undefined)?.error?.code;
  if (fromData) return fromData;
  return (JSON.parse(err.responseBody ?? "{}") as { error?: { code?: string } }).error?.code;
}

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected the call to fail");
}

export function aiSdkSuite(provider: ProviderUnderTest): void {
  // Real server processes; bunfig.toml's [test] timeout is not a key bun reads (its default is 5 s).
  setDefaultTimeout(60_000);
  let stack: ProxyStack;
  let recorder: RecordingFetch;
  const modelFor = (user: string, modelId = MODEL) => provider.model({ baseURL: stack.baseURL, apiKey: stack.secretKey, user, fetch: recorder.fetch }, modelId);

  /** streamText never throws: its errors go to onError (and the stream's error part). */
  async function streamErrors(model: LanguageModel, prompt: string): Promise<{ errors: unknown[]; text: string }> {
    const errors: unknown[] = [];
    const result = streamText({ model, prompt, onError: ({ error }) => void errors.push(error) });
    let text = "";
    for await (const delta of result.textStream) text += delta;
    // With nothing generated, awaiting the text rejects too: the caller cannot mistake it for "".
    expect(await caught(Promise.resolve(result.text))).toBeInstanceOf(Error);
    return { errors, text };
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

  describe(`ai + ${provider.name} through the proxy`, () => {
    test("generateText: the text, its usage, one ledger row at the upstream's cost", async () => {
      const before = await mark(stack, "json");
      const result = await generateText({ model: modelFor("json"), prompt: "Say hi" });
      expect(result.text).toBe(completionText(DEFAULT_COMPLETION_TOKENS));
      const { served, row } = await expectOneChargedCall(stack, before, { stream: false });
      expect(result.usage).toMatchObject({ inputTokens: served.promptTokens, outputTokens: served.completionTokens });
      expect(result.response.id).toBe(served.id);
      expect(result.response.headers?.["x-request-id"]).toBe(row.requestId);
      if (provider.reportedCost) expect(provider.reportedCost(result.providerMetadata)).toBe(served.costUsd);
    });

    test("streamText: every delta and the usage from the final chunk", async () => {
      const before = await mark(stack, "stream");
      const result = streamText({ model: modelFor("stream"), prompt: "Say hi" });
      let text = "";
      for await (const delta of result.textStream) text += delta;
      expect(text).toBe(completionText(DEFAULT_COMPLETION_TOKENS));
      const { served } = await expectOneChargedCall(stack, before, { stream: true });
      expect(await result.usage).toMatchObject({ inputTokens: served.promptTokens, outputTokens: served.completionTokens });
      expect((await result.response).id).toBe(served.id);
      if (provider.reportedCost) expect(provider.reportedCost(await result.providerMetadata)).toBe(served.costUsd);
    });

    test("a user with no connection: APICallError 402 not_connected, not retried, nothing charged", async () => {
      const before = await mark(stack, "stranger");
      let from = recorder.attempts.length;
      const err = await caught(generateText({ model: modelFor("stranger"), prompt: "hi" }));
      expect(APICallError.isInstance(err)).toBe(true);
      expect((err as APICallError).statusCode).toBe(402);
      expect((err as APICallError).isRetryable).toBe(false);
      expect(proxyErrorCode(err as APICallError)).toBe("not_connected");
      await expectRefusedWithoutCharge(stack, before, recorder.since(from));

      from = recorder.attempts.length;
      const streamed = await streamErrors(modelFor("stranger"), "hi");
      expect(streamed.text).toBe("");
      expect(streamed.errors).toHaveLength(1);
      expect((streamed.errors[0] as APICallError).statusCode).toBe(402);
      await expectRefusedWithoutCharge(stack, before, recorder.since(from));
    });

    test("a budget too small: APICallError 402 budget_exceeded, not retried, nothing charged", async () => {
      const before = await mark(stack, "poor");
      const from = recorder.attempts.length;
      const err = await caught(generateText({ model: modelFor("poor", "openai/gpt-4o"), prompt: "hi ".repeat(40) }));
      expect(APICallError.isInstance(err)).toBe(true);
      expect((err as APICallError).statusCode).toBe(402);
      expect(proxyErrorCode(err as APICallError)).toBe("budget_exceeded");
      await expectRefusedWithoutCharge(stack, before, recorder.since(from));
    });

    test("an upstream 500 (generateText): 502, retried by the SDK, every attempt free", async () => {
      const before = await mark(stack, "upstream-500");
      const from = recorder.attempts.length;
      const err = await caught(generateText({ model: modelFor("upstream-500"), prompt: "hi [[mock status=500]]" }));
      // After its retries the SDK throws a RetryError whose last error is our 502.
      expect(RetryError.isInstance(err)).toBe(true);
      const last = (err as RetryError).lastError as APICallError;
      expect(last.statusCode).toBe(502);
      expect(proxyErrorCode(last)).toBe("upstream");
      // ai retries retryable errors twice by default (maxRetries 2).
      expect(await expectUpstreamFailureWithoutCharge(stack, before, recorder.since(from))).toBe(3);
    });

    test("an upstream 500 (streamText): the error reaches onError, retries free", async () => {
      const before = await mark(stack, "upstream-500-stream");
      const from = recorder.attempts.length;
      const { errors, text } = await streamErrors(modelFor("upstream-500-stream"), "hi [[mock status=500]]");
      expect(text).toBe("");
      expect(errors).toHaveLength(1);
      expect(((errors[0] as RetryError).lastError as APICallError).statusCode).toBe(502);
      expect(await expectUpstreamFailureWithoutCharge(stack, before, recorder.since(from))).toBe(3);
    });

    test("rate limited (RL_CHAT): 429 rate_limited after the SDK's retries, nothing charged", async () => {
      await exhaustRateLimit(stack, "limited");
      const before = await mark(stack, "limited");
      let from = recorder.attempts.length;
      const err = await caught(generateText({ model: modelFor("limited"), prompt: "hi" }));
      expect(RetryError.isInstance(err)).toBe(true);
      const last = (err as RetryError).lastError as APICallError;
      expect(last.statusCode).toBe(429);
      expect(proxyErrorCode(last)).toBe("rate_limited");
      // ai retries 429 twice by default, honouring Retry-After when it is under a minute.
      expect(await expectRateLimitedWithoutCharge(stack, before, recorder.since(from))).toBe(3);

      from = recorder.attempts.length;
      const { errors, text } = await streamErrors(modelFor("limited"), "hi");
      expect(text).toBe("");
      expect(((errors[0] as RetryError).lastError as APICallError).statusCode).toBe(429);
      expect(await expectRateLimitedWithoutCharge(stack, before, recorder.since(from))).toBe(3);
    });
  });
}
