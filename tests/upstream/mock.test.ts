/**
 * The mock upstream's routes, JSON completions and error scenarios, checked against the
 * spec's schemas (tests/fixtures/openrouter-schemas.json). Streams: mock-stream.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { completionText, createMockUpstream, estimatePromptTokens, startMockUpstream, type RunningMockUpstream } from "../../packages/mock-upstream/src";
import { validateChatCompletion, validateError, validateModels } from "../helpers/openrouter-spec";

const AUTH = { authorization: "Bearer sk-or-test", "content-type": "application/json" };

function chatRequest(body: Record<string, unknown>, headers: Record<string, string> = AUTH): Request {
  return new Request("http://mock.local/api/v1/chat/completions", {
    method: "POST",
    headers,
    body: JSON.stringify(body),
  });
}

function ask(text: string, extra: Record<string, unknown> = {}) {
  return chatRequest({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: text }], ...extra });
}

async function json(response: Response): Promise<any> {
  expect(response.headers.get("content-type")).toBe("application/json");
  return response.json();
}

describe("GET /models", () => {
  test("lists the catalogue in the spec's ModelsListResponse shape, with or without /api/v1", async () => {
    const mock = createMockUpstream();
    for (const url of ["http://mock.local/api/v1/models", "http://mock.local/models"]) {
      const body = await json(await mock.fetch(new Request(url)));
      expect(validateModels(body)).toEqual([]);
      expect(body.total_count).toBe(body.data.length);
      const mini = body.data.find((m: any) => m.id === "openai/gpt-4o-mini");
      expect(mini.pricing).toMatchObject({ prompt: "0.00000015", completion: "0.0000006" });
      expect(mini.context_length).toBe(128000);
      expect(mini.top_provider.max_completion_tokens).toBe(16384);
      const sonnet = body.data.find((m: any) => m.id === "anthropic/claude-3.5-sonnet");
      expect(sonnet.pricing).toMatchObject({ prompt: "0.000003", completion: "0.000015" });
      expect(body.data.find((m: any) => m.id === "mock/free").pricing).toMatchObject({ prompt: "0", completion: "0" });
      expect(body.data.some((m: any) => m.id === "meta-llama/llama-3.1-8b-instruct")).toBe(true);
    }
  });

  test("shows edits to mock.models (prices can change under a running proxy)", async () => {
    const mock = createMockUpstream();
    mock.models[0]!.pricing.prompt = "0.001";
    const body = await json(await mock.fetch(new Request("http://mock.local/models")));
    expect(body.data[0].pricing.prompt).toBe("0.001");
  });
});

describe("POST /chat/completions (JSON)", () => {
  test("answers a ChatResult whose usage and cost follow from the prompt and the scenario", async () => {
    const mock = createMockUpstream();
    const messages = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Hello there [[mock tokens=7]]" },
    ];
    const response = await mock.fetch(chatRequest({ model: "anthropic/claude-3.5-sonnet", messages }));
    expect(response.status).toBe(200);
    const body = await json(response);
    expect(validateChatCompletion(body)).toEqual([]);

    const promptTokens = Math.ceil(("Be brief.".length + "Hello there [[mock tokens=7]]".length) / 4) + 8;
    expect(estimatePromptTokens(messages)).toBe(promptTokens);
    expect(body.id).toMatch(/^gen-\d+-[A-Za-z0-9]{20}$/);
    expect(response.headers.get("x-generation-id")).toBe(body.id);
    expect(body.model).toBe("anthropic/claude-3.5-sonnet");
    expect(body.choices[0].finish_reason).toBe("stop");
    expect(body.choices[0].message.content).toBe(completionText(7));
    expect(body.choices[0].message.content.split(" ")).toHaveLength(7);
    expect(body.usage).toMatchObject({ prompt_tokens: promptTokens, completion_tokens: 7, total_tokens: promptTokens + 7 });
    expect(body.usage.cost).toBeCloseTo(promptTokens * 0.000003 + 7 * 0.000015, 15);

    expect(mock.served).toHaveLength(1);
    expect(mock.served[0]).toMatchObject({
      id: body.id,
      model: "anthropic/claude-3.5-sonnet",
      stream: false,
      maxTokens: null,
      promptTokens,
      completionTokens: 7,
      deliveredTokens: 7,
      costUsd: body.usage.cost,
      status: 200,
      completed: true,
      aborted: false,
    });
    expect(mock.served[0]!.headers.authorization).toBe("Bearer sk-or-test");
    expect(mock.served[0]!.body).toMatchObject({ messages });
  });

  test("max_tokens (or max_completion_tokens) cuts the completion with finish_reason length", async () => {
    const mock = createMockUpstream();
    for (const field of ["max_tokens", "max_completion_tokens"]) {
      const body = await json(await mock.fetch(ask("hi [[mock tokens=10]]", { [field]: 4 })));
      expect(validateChatCompletion(body)).toEqual([]);
      expect(body.choices[0].finish_reason).toBe("length");
      expect(body.usage.completion_tokens).toBe(4);
    }
    expect(mock.served.map((s) => s.maxTokens)).toEqual([4, 4]);
    // A limit above the scenario's length changes nothing; the default length is 16.
    const body = await json(await mock.fetch(ask("hi", { max_tokens: 100 })));
    expect(body.usage.completion_tokens).toBe(16);
    expect(body.choices[0].finish_reason).toBe("stop");
  });

  test("costs are exact decimals, and free models cost 0", async () => {
    const mock = createMockUpstream();
    // The float sum carries binary noise; the mock reports the decimal it stands for.
    const body = await json(await mock.fetch(ask("abcd [[mock tokens=4]]")));
    const expected = Number((body.usage.prompt_tokens * 0.00000015 + 4 * 0.0000006).toFixed(12));
    expect(body.usage.cost).toBe(expected);
    const free = await json(await mock.fetch(chatRequest({ model: "mock/free", messages: [{ role: "user", content: "hi" }] })));
    expect(free.usage.cost).toBe(0);
  });

  test("no_cost leaves cost out of usage; no_usage leaves usage out", async () => {
    const mock = createMockUpstream();
    const noCost = await json(await mock.fetch(ask("[[mock no_cost]]")));
    expect(validateChatCompletion(noCost)).toEqual([]);
    expect(noCost.usage.completion_tokens).toBe(16);
    expect("cost" in noCost.usage).toBe(false);
    const noUsage = await json(await mock.fetch(ask("[[mock no_usage]]")));
    expect(validateChatCompletion(noUsage)).toEqual([]);
    expect("usage" in noUsage).toBe(false);
    // The log still knows what it would have cost.
    expect(mock.served[1]!.costUsd).toBeGreaterThan(0);
  });

  test("recordServed: false keeps no log (long load runs)", async () => {
    const mock = createMockUpstream({ recordServed: false });
    expect((await mock.fetch(ask("hi"))).status).toBe(200);
    expect(mock.served).toEqual([]);
  });

  test("sends rate-limit headers", async () => {
    const mock = createMockUpstream({ rateLimitPerMinute: 50, now: () => 1_800_000_030_000 });
    const first = await mock.fetch(ask("hi"));
    const second = await mock.fetch(ask("hi"));
    expect(first.headers.get("x-ratelimit-limit")).toBe("50");
    expect(first.headers.get("x-ratelimit-remaining")).toBe("49");
    expect(second.headers.get("x-ratelimit-remaining")).toBe("48");
    expect(first.headers.get("x-ratelimit-reset")).toBe("1800000060000");
  });
});

describe("request errors", () => {
  test("401 without a Bearer key; any non-empty key is accepted", async () => {
    const mock = createMockUpstream();
    for (const headers of [{ "content-type": "application/json" }, { ...AUTH, authorization: "Basic abc" }, { ...AUTH, authorization: "Bearer " }]) {
      const response = await mock.fetch(chatRequest({ model: "openai/gpt-4o-mini", messages: [] }, headers));
      expect(response.status).toBe(401);
      expect(validateError(await json(response), 401)).toEqual([]);
    }
    expect(mock.served.map((s) => s.status)).toEqual([401, 401, 401]);
  });

  test("400 for an unknown model, a missing model or messages, a bad max_tokens, bad JSON", async () => {
    const mock = createMockUpstream();
    const cases: Array<[Request, string]> = [
      [chatRequest({ model: "openai/gpt-9", messages: [{ role: "user", content: "hi" }] }), "openai/gpt-9 is not a valid model ID"],
      [chatRequest({ messages: [{ role: "user", content: "hi" }] }), "No models provided"],
      [chatRequest({ model: "openai/gpt-4o-mini" }), "messages"],
      [ask("hi", { max_tokens: 0 }), "max_tokens"],
      [new Request("http://mock.local/chat/completions", { method: "POST", headers: AUTH, body: "{" }), "JSON"],
    ];
    for (const [request, message] of cases) {
      const response = await mock.fetch(request);
      expect(response.status).toBe(400);
      const body = await json(response);
      expect(validateError(body, 400)).toEqual([]);
      expect(body.error.message).toContain(message);
    }
  });

  test("400 when prompt + max_tokens exceed the model's context length", async () => {
    const mock = createMockUpstream();
    const response = await mock.fetch(chatRequest({ model: "mock/free", max_tokens: 32768, messages: [{ role: "user", content: "hi" }] }));
    expect(response.status).toBe(400);
    expect((await json(response)).error.message).toContain("maximum context length is 32768");
  });

  test("an unknown directive key is a 400, not silently ignored", async () => {
    const response = await createMockUpstream().fetch(ask("[[mock tokens=3 stal_mid_stream]]"));
    expect(response.status).toBe(400);
    expect((await json(response)).error.message).toContain("stal_mid_stream");
  });

  test("404 for other paths, 405 for other methods", async () => {
    const mock = createMockUpstream();
    expect((await mock.fetch(new Request("http://mock.local/api/v1/embeddings"))).status).toBe(404);
    const wrong = await mock.fetch(new Request("http://mock.local/api/v1/chat/completions"));
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get("allow")).toBe("POST");
  });
});

describe("scenarios: HTTP errors", () => {
  test.each([402, 403, 429, 500, 502, 503])("status=%d answers OpenRouter's error body", async (status) => {
    const mock = createMockUpstream();
    const response = await mock.fetch(ask(`hi [[mock status=${status}]]`, { stream: true }));
    expect(response.status).toBe(status);
    const body = await json(response);
    expect(validateError(body, status)).toEqual([]);
    if (status === 403) expect(body.error.message).toBe("Key limit exceeded");
    if (status === 429) expect(response.headers.get("retry-after")).toBe("1");
    expect(mock.served[0]).toMatchObject({ status, completed: true, completionTokens: 0, costUsd: 0 });
  });

  test("retry_after sets the 429's retry-after", async () => {
    const response = await createMockUpstream().fetch(ask("[[mock status=429 retry_after=7]]"));
    expect(response.headers.get("retry-after")).toBe("7");
  });

  test("error_200 is an HTTP 200 whose body is an error", async () => {
    for (const stream of [false, true]) {
      const response = await createMockUpstream().fetch(ask("[[mock error_200]]", { stream }));
      expect(response.status).toBe(200);
      const body = await json(response);
      expect(validateError(body)).toEqual([]);
      expect(body.error.code).toBe(502);
    }
  });

  test("defaults apply to every request, under the directives", async () => {
    const mock = createMockUpstream({ defaults: "status=503" });
    expect((await mock.fetch(ask("hi"))).status).toBe(503);
    expect((await mock.fetch(ask("hi [[mock status=502]]"))).status).toBe(502);
    const objectDefaults = createMockUpstream({ defaults: { tokens: 2 } });
    expect((await json(await objectDefaults.fetch(ask("hi")))).usage.completion_tokens).toBe(2);
    expect(() => createMockUpstream({ defaults: "tokenz=2" })).toThrow("tokenz");
  });

  test("only the last message's directives count", async () => {
    const mock = createMockUpstream();
    const request = chatRequest({
      model: "openai/gpt-4o-mini",
      messages: [
        { role: "user", content: "[[mock status=500]]" },
        { role: "user", content: [{ type: "text", text: "[[mock tokens=3]]" }] },
      ],
    });
    const body = await json(await mock.fetch(request));
    expect(body.usage.completion_tokens).toBe(3);
  });
});

describe("startMockUpstream", () => {
  let upstream: RunningMockUpstream;
  beforeAll(async () => {
    upstream = await startMockUpstream();
  });
  afterAll(() => upstream.stop());

  test("serves over HTTP at a base URL ending in /api/v1", async () => {
    expect(upstream.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/v1$/);
    const models = await fetch(`${upstream.url}/models`);
    expect(validateModels(await models.json())).toEqual([]);
    const response = await fetch(`${upstream.url}/chat/completions`, {
      method: "POST",
      headers: AUTH,
      body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi [[mock tokens=3]]" }] }),
    });
    const body = await json(response);
    expect(validateChatCompletion(body)).toEqual([]);
    expect(upstream.mock.served.at(-1)).toMatchObject({ id: body.id, completed: true, completionTokens: 3 });
  });

  test("stall_before_headers never answers, and lets go when the client aborts", async () => {
    const controller = new AbortController();
    let settled = false;
    const pending = fetch(`${upstream.url}/chat/completions`, {
      method: "POST",
      headers: AUTH,
      body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "[[mock stall_before_headers]]" }] }),
      signal: controller.signal,
    }).finally(() => (settled = true));
    while (upstream.mock.served.at(-1)?.scenario?.stallBeforeHeaders !== true) await Bun.sleep(5);
    await Bun.sleep(30);
    expect(settled).toBe(false);
    controller.abort();
    await expect(pending).rejects.toThrow();
    const entry = upstream.mock.served.at(-1)!;
    while (!entry.aborted) await Bun.sleep(5);
    expect(entry.completed).toBe(false);
  });
});

test("stall_before_headers in-process: the promise rejects with the request's abort reason", async () => {
  const mock = createMockUpstream();
  const controller = new AbortController();
  const request = new Request("http://mock.local/chat/completions", {
    method: "POST",
    headers: AUTH,
    body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "[[mock stall_before_headers]]" }] }),
    signal: controller.signal,
  });
  const pending = mock.fetch(request);
  while (mock.served.length === 0) await Bun.sleep(1);
  controller.abort(new Error("client gave up"));
  await expect(pending).rejects.toThrow("client gave up");
  expect(mock.served[0]).toMatchObject({ aborted: true, completed: false });
});

describe("JSON completions cut mid-body", () => {
  test("reset_mid_stream sends half the JSON body, then the body fails like a reset connection", async () => {
    const mock = createMockUpstream();
    const response = await mock.fetch(ask("[[mock tokens=8 reset_mid_stream]]"));
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first.startsWith('{"id":"gen-')).toBe(true);
    expect(() => JSON.parse(first)).toThrow();
    await expect(reader.read()).rejects.toMatchObject({ code: "ECONNRESET" });
    expect(mock.served[0]).toMatchObject({ completed: false, aborted: false, deliveredTokens: 0 });
  });

  test("stall_mid_stream sends half the JSON body, then nothing until the reader cancels", async () => {
    const mock = createMockUpstream();
    const response = await mock.fetch(ask("[[mock tokens=8 stall_mid_stream]]"));
    const reader = response.body!.getReader();
    await reader.read();
    const next = reader.read();
    expect(await Promise.race([next.then(() => "data"), Bun.sleep(30).then(() => "pending")])).toBe("pending");
    await reader.cancel();
    expect((await next).done).toBe(true);
    expect(mock.served[0]).toMatchObject({ completed: false, aborted: true });
  });
});
