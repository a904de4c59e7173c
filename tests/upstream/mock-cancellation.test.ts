/**
 * What the mock upstream bills when a generation does not end as planned, as OpenRouter
 * documents: a stream aborted on a cancellable provider is billed for what it produced; on
 * any other provider, and for every JSON request, the generation runs on and is billed in
 * full (streaming page, "Stream Cancellation"); an error finish reason, or no tokens and no
 * finish reason, waives the tokens (Zero Completion Insurance). `served[].costUsd` and the
 * record's `total_cost` always agree. Aborts happen at points the test chooses: a stream
 * that stalls after N chunks has produced exactly N when the client leaves.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { BILLING_MODELS, createMockUpstream, startMockUpstream, type MockModel, type RunningMockUpstream } from "../../packages/mock-upstream/src";
import { ask, chatRequest, KEY, miniUsd, readEvents, record, streamThenLeave, untilRecorded } from "./generation-helpers";

describe("a client that leaves a stream", () => {
  test("cancellable: the generation stops, billed for the prompt and the tokens produced; cancelled", async () => {
    const mock = createMockUpstream();
    const { served, data } = await streamThenLeave(mock, ask("[[mock tokens=10 stall_mid_stream after=3 cancellable]]"), 3);
    expect(served).toMatchObject({ aborted: true, completed: false, cancelled: true, deliveredTokens: 3, completionTokens: 3 });
    expect(served.costUsd).toBe(miniUsd(served.promptTokens, 3));
    expect(data).toMatchObject({ cancelled: true, streamed: true, tokens_completion: 3, finish_reason: null, total_cost: served.costUsd });
  });

  test("not cancellable (the default provider): the generation runs to its end and is billed in full", async () => {
    const mock = createMockUpstream();
    const { served, data } = await streamThenLeave(mock, ask("[[mock tokens=10 stall_mid_stream after=3]]"), 3);
    expect(served).toMatchObject({ aborted: true, completed: false, cancelled: false, deliveredTokens: 3, completionTokens: 10 });
    expect(served.costUsd).toBe(miniUsd(served.promptTokens, 10));
    expect(data).toMatchObject({ cancelled: false, tokens_completion: 10, finish_reason: "stop", total_cost: served.costUsd });
  });

  test("a connection cut mid-stream (reset_mid_stream) counts as the client leaving", async () => {
    const mock = createMockUpstream();
    for (const [directive, tokens, cancelled] of [
      ["cancellable", 3, true],
      ["", 10, false],
    ] as const) {
      const response = await mock.fetch(chatRequest(ask(`[[mock tokens=10 reset_mid_stream after=3 ${directive}]]`, { stream: true })));
      await expect(response.text()).rejects.toMatchObject({ code: "ECONNRESET" });
      const served = mock.served.at(-1)!;
      expect(served).toMatchObject({ deliveredTokens: 3, aborted: false, completed: false });
      expect(await record(mock, served.id)).toMatchObject({ cancelled, tokens_completion: tokens, total_cost: miniUsd(served.promptTokens, tokens) });
    }
  });

  test("a plain stream left mid-way: billed for exactly what the mock produced", async () => {
    const mock = createMockUpstream();
    const { served, data } = await streamThenLeave(mock, ask("[[mock tokens=40 cancellable]]"), 2);
    // A pull-based body may have produced one chunk ahead of the reader, never the rest.
    expect(served.deliveredTokens).toBeGreaterThanOrEqual(2);
    expect(served.deliveredTokens).toBeLessThan(40);
    expect(served.costUsd).toBe(miniUsd(served.promptTokens, served.deliveredTokens));
    expect(data.tokens_completion).toBe(served.deliveredTokens);
  });

  test("the serving provider's `cancellable` decides; `no_cancel` and `cancellable` override it per request", async () => {
    const model: MockModel = {
      id: "test/two-kinds",
      name: "Test: a cancellable provider",
      pricing: { prompt: "0.000001", completion: "0.000002" },
      contextLength: 8192,
      maxCompletionTokens: 4096,
      providers: [{ name: "Stops", priceMultiplier: 1, cancellable: true }],
    };
    const mock = createMockUpstream({ models: [model] });
    const leave = (directives: string) =>
      streamThenLeave(mock, { model: model.id, messages: [{ role: "user", content: `[[mock tokens=8 stall_mid_stream after=2 ${directives}]]` }] }, 2);
    expect((await leave("")).data).toMatchObject({ provider_name: "Stops", cancelled: true, tokens_completion: 2 });
    expect((await leave("no_cancel")).data).toMatchObject({ cancelled: false, tokens_completion: 8 });
    expect((await leave("cancellable=false")).data).toMatchObject({ cancelled: false, tokens_completion: 8 });
  });

  test("reasoning produced before the client left is billed, sent or hidden", async () => {
    const mock = createMockUpstream({ models: [...BILLING_MODELS] });
    // bill/reasoner (picos per token): prompt 1.1e6, completion 4.4e6, reasoning 9e6.
    const expected = (promptTokens: number) => (promptTokens * 1_100_000 + 1 * 4_400_000 + 400 * 9_000_000) / 1e12;
    const text = "[[mock tokens=6 reasoning=400 stall_mid_stream after=1 cancellable]]";
    const shown = await streamThenLeave(mock, { model: "bill/reasoner", messages: [{ role: "user", content: text }] }, 8 + 1);
    expect(shown.data).toMatchObject({ cancelled: true, native_tokens_reasoning: 400, tokens_completion: 401 });
    expect(shown.served.costUsd).toBe(expected(shown.served.promptTokens));
    const hidden = await streamThenLeave(mock, { model: "bill/reasoner", reasoning: { exclude: true }, messages: [{ role: "user", content: text }] }, 1);
    expect(hidden.data).toMatchObject({ cancelled: true, native_tokens_reasoning: 400, tokens_completion: 401 });
    expect(hidden.served.costUsd).toBe(expected(hidden.served.promptTokens));
  });

  test("cancelled before any token: nothing produced, no finish reason, the tokens are not billed", async () => {
    const mock = createMockUpstream();
    const controller = new AbortController();
    const pending = mock.fetch(chatRequest(ask("[[mock delay_ms=600000 cancellable]]", { stream: true }), controller.signal));
    while (mock.served[0]?.scenario == null) await Bun.sleep(1);
    controller.abort(new Error("client gave up"));
    await expect(pending).rejects.toThrow("client gave up");
    const served = mock.served[0]!;
    expect(served).toMatchObject({ aborted: true, cancelled: true, completionTokens: 0, costUsd: 0 });
    expect(await record(mock, served.id)).toMatchObject({ cancelled: true, tokens_completion: 0, finish_reason: null, total_cost: 0 });
  });
});

describe("a JSON request whose client leaves is billed in full", () => {
  test("delay_ms: the answer is slow, the client aborts before it, the generation is billed to its end", async () => {
    const mock = createMockUpstream();
    const controller = new AbortController();
    // A cancellable provider changes nothing: cancellation is for streams only.
    const pending = mock.fetch(chatRequest(ask("[[mock tokens=9 delay_ms=600000 cancellable]]"), controller.signal));
    while (mock.served[0]?.scenario == null) await Bun.sleep(1);
    controller.abort(new Error("proxy timed out"));
    await expect(pending).rejects.toThrow("proxy timed out");
    const served = mock.served[0]!;
    expect(served).toMatchObject({ aborted: true, completed: false, cancelled: false, deliveredTokens: 0, completionTokens: 9 });
    expect(served.costUsd).toBe(miniUsd(served.promptTokens, 9));
    expect(await record(mock, served.id)).toMatchObject({ streamed: false, cancelled: false, finish_reason: "stop", total_cost: served.costUsd });
  });

  test("delay_ms answers, headers and all, once the delay has passed", async () => {
    const mock = createMockUpstream();
    const response = await mock.fetch(chatRequest(ask("[[mock tokens=2 delay_ms=5]]")));
    expect(response.status).toBe(200);
    expect(((await response.json()) as any).usage.completion_tokens).toBe(2);
    expect(mock.served[0]).toMatchObject({ completed: true, aborted: false });
  });

  test("stall_before_headers never becomes a generation: no record, nothing billed", async () => {
    const mock = createMockUpstream();
    const controller = new AbortController();
    const pending = mock.fetch(chatRequest(ask("[[mock stall_before_headers]]"), controller.signal));
    while (mock.served[0]?.scenario == null) await Bun.sleep(1);
    controller.abort();
    await expect(pending).rejects.toThrow();
    expect(mock.served[0]).toMatchObject({ aborted: true, costUsd: 0 });
    expect(mock.generation(mock.served[0]!.id)).toBeUndefined();
  });
});

describe("errors after the model started (Zero Completion Insurance)", () => {
  test("error_200: the generation has its id in the header and a record; its tokens are not billed, a request fee is", async () => {
    const mock = createMockUpstream({ models: [...BILLING_MODELS] });
    for (const stream of [false, true]) {
      const response = await mock.fetch(chatRequest({ model: "bill/fee", stream, messages: [{ role: "user", content: "[[mock error_200]]" }] }));
      expect(response.status).toBe(200);
      const id = response.headers.get("x-generation-id")!;
      expect(id).toMatch(/^gen-/);
      await response.text();
      expect(await record(mock, id)).toMatchObject({ finish_reason: "error", tokens_completion: 0, streamed: stream, total_cost: 0.002 });
      expect(mock.served.at(-1)!.costUsd).toBe(0.002);
    }
  });

  test("mid_stream_error after tokens were sent: a record with what was produced, the tokens not billed", async () => {
    const mock = createMockUpstream();
    const response = await mock.fetch(chatRequest(ask("[[mock tokens=6 mid_stream_error after=2]]", { stream: true })));
    await response.text();
    const served = mock.served[0]!;
    expect(served).toMatchObject({ deliveredTokens: 2, completionTokens: 2, costUsd: 0 });
    expect(await record(mock, served.id)).toMatchObject({ finish_reason: "error", tokens_completion: 2, cancelled: false, total_cost: 0 });
  });

  test("a non-cancellable stream left before its planned mid-stream error ends at that error, like the rest", async () => {
    const mock = createMockUpstream();
    const { served, data } = await streamThenLeave(mock, ask("[[mock tokens=20 pause_ms=1 mid_stream_error after=15]]"), 1);
    expect(served.aborted).toBe(true);
    expect(data).toMatchObject({ finish_reason: "error", tokens_completion: 15, total_cost: 0 });
  });
});

describe("over a socket, as the proxy meets the mock", () => {
  let upstream: RunningMockUpstream;
  beforeAll(async () => {
    upstream = await startMockUpstream();
  });
  afterAll(() => upstream.stop());

  async function leaveOverHttp(text: string, stream: boolean, chunks: number) {
    const log = upstream.mock.served;
    const before = log.length;
    const controller = new AbortController();
    const response = fetch(`${upstream.url}/chat/completions`, {
      method: "POST",
      headers: { ...KEY, "content-type": "application/json" },
      body: JSON.stringify(ask(text, { stream })),
      signal: controller.signal,
    });
    if (stream) await readEvents((await response).body!.getReader(), 1 + chunks);
    else while (log[before]?.scenario == null) await Bun.sleep(1);
    const served = log[before]!;
    controller.abort();
    await response.then((r) => r.text()).catch(() => {});
    await untilRecorded(upstream.mock, served.id);
    return { served, data: await record(upstream.mock, served.id) };
  }

  test("a cancellable stream: billed for the prompt and the tokens sent before the client left", async () => {
    const { served, data } = await leaveOverHttp("[[mock tokens=10 stall_mid_stream after=3 cancellable]]", true, 3);
    expect(data).toMatchObject({ cancelled: true, tokens_completion: 3, total_cost: miniUsd(served.promptTokens, 3) });
    expect(served.costUsd).toBe(data.total_cost);
  });

  test("a non-cancellable stream: billed in full", async () => {
    const { served, data } = await leaveOverHttp("[[mock tokens=10 stall_mid_stream after=3]]", true, 3);
    expect(data).toMatchObject({ cancelled: false, tokens_completion: 10, total_cost: miniUsd(served.promptTokens, 10) });
  });

  test("a slow JSON answer the client gave up on: billed in full", async () => {
    const { served, data } = await leaveOverHttp("[[mock tokens=9 delay_ms=600000]]", false, 0);
    expect(served.aborted).toBe(true);
    expect(data).toMatchObject({ streamed: false, tokens_completion: 9, total_cost: miniUsd(served.promptTokens, 9) });
  });
});
