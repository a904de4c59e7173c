/**
 * The mock upstream's GET /generation: a generation's record, what the upstream billed for
 * it in the end, in the spec's GenerationResponse shape (every body is validated, see
 * ./generation-helpers.ts). Records appear after a delay on the mock's own clock, so no
 * test waits in real time. Billing by how a generation ended: mock-cancellation.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { BILLING_MODELS, createMockUpstream, DEFAULT_MODELS, startMockUpstream, type RunningMockUpstream } from "../../packages/mock-upstream/src";
import { ask, chatRequest, checked, KEY, lookup, miniUsd, record, streamThenLeave } from "./generation-helpers";

const JANUARY_15 = Date.UTC(2026, 0, 15, 12, 0, 0, 250);

describe("GET /generation", () => {
  test("a JSON completion's record: its id, what it was billed, its tokens, who served it", async () => {
    const mock = createMockUpstream({ now: () => JANUARY_15 });
    const response = await mock.fetch(
      new Request("http://mock.local/api/v1/chat/completions", {
        method: "POST",
        headers: { ...KEY, "content-type": "application/json", "user-agent": "probe/1", "http-referer": "https://app.example" },
        body: JSON.stringify(ask("hi [[mock tokens=7]]", { user: "u-42" })),
      }),
    );
    const body: any = await response.json();
    const served = mock.served[0]!;
    expect(response.headers.get("x-generation-id")).toBe(body.id);

    const data = await record(mock, body.id);
    expect(data).toMatchObject({
      id: body.id,
      total_cost: body.usage.cost,
      usage: body.usage.cost,
      tokens_prompt: served.promptTokens,
      tokens_completion: 7,
      native_tokens_prompt: served.promptTokens,
      native_tokens_completion: 7,
      native_tokens_reasoning: 0,
      num_search_results: 0,
      streamed: false,
      cancelled: false,
      model: "openai/gpt-4o-mini",
      provider_name: "Mock",
      finish_reason: "stop",
      router: null,
      created_at: "2026-01-15T12:00:00.250+00:00",
      user_agent: "probe/1",
      http_referer: "https://app.example",
      external_user: "u-42",
    });
    expect(data.total_cost).toBe(miniUsd(served.promptTokens, 7));
    expect(served.costUsd).toBe(data.total_cost);
  });

  test("a streamed completion's record, with web results, reasoning and the router that chose the model", async () => {
    const mock = createMockUpstream({ models: [...BILLING_MODELS] });
    const search = await mock.fetch(chatRequest({ model: "bill/search:online", stream: true, messages: [{ role: "user", content: "[[mock tokens=3]]" }] }));
    await search.text();
    expect(await record(mock, search.headers.get("x-generation-id")!)).toMatchObject({
      streamed: true,
      num_search_results: 5,
      web_search_engine: "exa",
      total_cost: mock.served[0]!.costUsd,
    });

    const reasoner = await mock.fetch(chatRequest({ model: "bill/reasoner", messages: [{ role: "user", content: "[[mock tokens=3 reasoning=40]]" }] }));
    await reasoner.text();
    expect(await record(mock, reasoner.headers.get("x-generation-id")!)).toMatchObject({ tokens_completion: 43, native_tokens_reasoning: 40 });

    const routed = await mock.fetch(chatRequest({ model: "bill/auto", messages: [{ role: "user", content: "hi" }] }));
    await routed.text();
    expect(await record(mock, routed.headers.get("x-generation-id")!)).toMatchObject({ model: "bill/o1-pro", router: "bill/auto" });
  });

  test("401 without a bearer key, 400 without an id, 404 for an id it never served", async () => {
    const mock = createMockUpstream();
    const response = await mock.fetch(chatRequest(ask("hi")));
    const id = response.headers.get("x-generation-id")!;
    expect((await lookup(mock, id, {})).status).toBe(401);
    expect((await lookup(mock, id, { authorization: "sk-or-test" })).status).toBe(401);
    expect((await checked(await mock.fetch(new Request("http://mock.local/api/v1/generation", { headers: KEY })))).status).toBe(400);
    expect((await lookup(mock, "gen-0-unknown")).status).toBe(404);
    expect((await lookup(mock, id)).status).toBe(200);
    const post = await mock.fetch(new Request(`http://mock.local/api/v1/generation?id=${id}`, { method: "POST", headers: KEY }));
    expect(post.status).toBe(405);
  });

  test("a request that failed before any generation has no record, ever", async () => {
    const mock = createMockUpstream();
    for (const text of ["[[mock status=503]]", "[[mock status=429]]", "[[mock tokenz=1]]"]) await mock.fetch(chatRequest(ask(text)));
    await mock.fetch(chatRequest({ model: "no/such-model", messages: [{ role: "user", content: "hi" }] }));
    expect(mock.served.map((s) => s.status)).toEqual([503, 429, 400, 400]);
    for (const served of mock.served) {
      expect((await lookup(mock, served.id)).status).toBe(404);
      expect(mock.generation(served.id)).toBeUndefined();
    }
  });

  test("the record appears generationRecordDelayMs after the generation ends, on the mock's clock", async () => {
    let clock = JANUARY_15;
    const mock = createMockUpstream({ now: () => clock, generationRecordDelayMs: 2000 });
    const response = await mock.fetch(chatRequest(ask("hi")));
    const id = response.headers.get("x-generation-id")!;
    // Known to the mock (the answer is out), not yet to GET /generation.
    expect(mock.generation(id)).toMatchObject({ id, visibleAt: JANUARY_15 + 2000 });
    expect((await lookup(mock, id)).status).toBe(404);
    clock += 1999;
    expect((await lookup(mock, id)).status).toBe(404);
    clock += 1;
    expect((await lookup(mock, id)).status).toBe(200);
  });

  test("record_after_ms sets the delay for one request, over the mock's default", async () => {
    let clock = JANUARY_15;
    const mock = createMockUpstream({ now: () => clock, generationRecordDelayMs: 10_000 });
    const late = (await mock.fetch(chatRequest(ask("[[mock record_after_ms=500]]")))).headers.get("x-generation-id")!;
    const prompt = (await mock.fetch(chatRequest(ask("[[mock record_after_ms=0]]")))).headers.get("x-generation-id")!;
    const usual = (await mock.fetch(chatRequest(ask("hi")))).headers.get("x-generation-id")!;
    expect((await lookup(mock, prompt)).status).toBe(200);
    expect((await lookup(mock, late)).status).toBe(404);
    clock += 500;
    expect((await lookup(mock, late)).status).toBe(200);
    expect((await lookup(mock, usual)).status).toBe(404);
    clock += 9_500;
    expect((await lookup(mock, usual)).status).toBe(200);
  });

  test("records are bounded: beyond generationRecordLimit the oldest is dropped first", async () => {
    const mock = createMockUpstream({ generationRecordLimit: 2 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await mock.fetch(chatRequest(ask("hi")))).headers.get("x-generation-id")!);
    expect(await Promise.all(ids.map(async (id) => (await lookup(mock, id)).status))).toEqual([404, 200, 200]);
    const none = createMockUpstream({ generationRecordLimit: 0 });
    const id = (await none.fetch(chatRequest(ask("hi")))).headers.get("x-generation-id")!;
    expect((await lookup(none, id)).status).toBe(404);
  });
});

describe("GET /generation over a socket", () => {
  let upstream: RunningMockUpstream;
  beforeAll(async () => {
    upstream = await startMockUpstream({ recordServed: false });
  });
  afterAll(() => upstream.stop());

  test("is served under the /api/v1 base, also when the served log is off (demo mode)", async () => {
    const response = await fetch(`${upstream.url}/chat/completions`, {
      method: "POST",
      headers: { ...KEY, "content-type": "application/json" },
      body: JSON.stringify(ask("hi [[mock tokens=2]]", { stream: true })),
    });
    const id = response.headers.get("x-generation-id")!;
    await response.text();
    const { status, body } = await checked(await fetch(`${upstream.url}/generation?id=${id}`, { headers: KEY }));
    expect(status).toBe(200);
    expect(body.data).toMatchObject({ id, streamed: true, tokens_completion: 2, finish_reason: "stop" });
    expect((await checked(await fetch(`${upstream.url}/generation?id=${id}`))).status).toBe(401);
  });
});

test("the books: served[].costUsd adds up to the records' total_cost, whatever each generation met", async () => {
  const mock = createMockUpstream({ models: [...BILLING_MODELS, ...DEFAULT_MODELS] });
  const complete = async (body: Record<string, unknown>) => (await mock.fetch(chatRequest(body))).text();
  await complete(ask("[[mock tokens=5]]"));
  await complete(ask("[[mock tokens=5]]", { stream: true }));
  await complete({ model: "bill/search:online", messages: [{ role: "user", content: "hi" }] });
  await complete({ model: "bill/reasoner", stream: true, messages: [{ role: "user", content: "[[mock tokens=3 reasoning=64]]" }] });
  await complete({ model: "bill/fee", messages: [{ role: "user", content: "[[mock error_200]]" }] });
  await complete(ask("[[mock tokens=6 mid_stream_error after=2]]", { stream: true }));
  await complete(ask("[[mock status=500]]"));
  await streamThenLeave(mock, ask("[[mock tokens=12 stall_mid_stream after=4 cancellable]]"), 4);
  await streamThenLeave(mock, ask("[[mock tokens=12 stall_mid_stream after=4]]"), 4);

  const picos = (usd: number) => Math.round(usd * 1e12);
  let books = 0;
  for (const served of mock.served) {
    const { status, body } = await lookup(mock, served.id);
    expect({ id: served.id, status }).toEqual({ id: served.id, status: served.status === 200 ? 200 : 404 });
    if (status === 200) expect(body.data.total_cost).toBe(served.costUsd);
    books += status === 200 ? picos(body.data.total_cost) : 0;
  }
  expect(books).toBeGreaterThan(0);
  expect(mock.served.reduce((sum, s) => sum + picos(s.costUsd), 0)).toBe(books);
});
