import { describe, expect, test } from "bun:test";
import { chatTestApp, UPSTREAM_KEY } from "../helpers/chat-app";
import { validateChatChunk, validateChatCompletion, parseSseEvents } from "../helpers/openrouter-spec";
import { usdToNanoCeil } from "../../src/money";

const MODEL = "openai/gpt-4o-mini";

const json = async (r: Response): Promise<any> => r.json();
const ask = (text: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: "user", content: text }], ...extra });

describe("POST /api/v1/chat/completions, JSON", () => {
  test("relays the completion, meters usage.cost, and shows it in /status and /usage", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const res = await t.chat(ask("Say hello", { max_tokens: 12 }));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/json");
    const body = await json(res);
    expect(validateChatCompletion(body)).toEqual([]);
    expect(res.headers.get("x-generation-id")).toBe(body.id);
    expect(res.headers.get("x-request-id")).toBeTruthy();
    await t.flush();
    const row = await t.deps.store.usageLedger.find(res.headers.get("x-request-id")!);
    expect(row).toMatchObject({ source: "upstream", status: "ok", generationId: body.id, appUserId: "alice", streamed: false });
    expect(row!.costNano).toBe(Math.ceil(body.usage.cost * 1e9 - 1e-6));
    const status = await json(await t.get("/api/v1/status?appUserId=alice"));
    expect(status.usage.monthlyUsd).toBeCloseTo(row!.costNano / 1e9, 12);
    const usage = await json(await t.get("/api/v1/usage?appUserId=alice&period=2026-01"));
    expect(usage.data).toHaveLength(1);
    expect(usage.data[0]).toMatchObject({ requestId: row!.requestId, source: "upstream", model: MODEL });
  });

  test("the upstream gets the operator's key, never the client's Authorization, and every other field untouched", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const tools = [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }];
    await t.chat(ask("hi", { temperature: 0.3, tools, provider: { order: ["openai"] }, response_format: { type: "json_object" } }), { "x-title": "My App" });
    const served = t.mock.served.at(-1)!;
    expect(served.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(served.headers["x-title"]).toBe("My App");
    expect(served.headers["x-service-user"]).toBeUndefined();
    const sent = served.body as Record<string, unknown>;
    expect(sent).toMatchObject({
      temperature: 0.3,
      tools,
      provider: { order: ["openai"] },
      response_format: { type: "json_object" },
      usage: { include: true },
    });
    expect(typeof sent.max_tokens).toBe("number");
  });

  test("usage without cost is charged at catalogue prices (source computed)", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const res = await t.chat(ask("hi [[mock no_cost]]"));
    const body = await json(res);
    await t.flush();
    const row = (await t.deps.store.usageLedger.find(res.headers.get("x-request-id")!))!;
    expect(row.source).toBe("computed");
    expect(row.costNano).toBe(body.usage.prompt_tokens * 150 + body.usage.completion_tokens * 600);
  });
});

describe("POST /api/v1/chat/completions, errors", () => {
  test("missing x-service-user is 400; an unconnected user is 402 not_connected", async () => {
    const t = await chatTestApp();
    const res = await t.chat(ask("hi"), { "x-service-user": "" });
    expect(res.status).toBe(400);
    expect((await json(res)).error.code).toBe("invalid_request");
    const res2 = await t.chat(ask("hi"), { "x-service-user": "bob" });
    expect(res2.status).toBe(402);
    expect((await json(res2)).error.code).toBe("not_connected");
    expect(t.mock.served).toHaveLength(0);
  });

  test("bad bodies are 400 naming the field", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    for (const [body, field] of [
      [{ messages: [{ role: "user", content: "x" }] }, "model"],
      [{ model: MODEL, messages: "x" }, "messages"],
      [{ model: MODEL, messages: [{ role: "user", content: "x" }], max_tokens: 0 }, "max_tokens"],
      [{ model: MODEL, messages: [{ role: "user", content: "x" }], stream: "yes" }, "stream"],
    ] as const) {
      const res = await t.chat(body as Record<string, unknown>);
      expect(res.status).toBe(400);
      expect((await json(res)).error.message).toContain(field);
    }
  });

  test("a max_tokens that is not a JSON integer is 400, never coerced, and nothing goes upstream", async () => {
    // The reservation is sized from max_tokens (the hard cap): only a real integer may size it.
    const t = await chatTestApp();
    await t.connect("alice", 5);
    for (const max_tokens of ["100", 1.5, "1e3"]) {
      const res = await t.chat(ask("hi", { max_tokens }));
      expect({ max_tokens, status: res.status }).toEqual({ max_tokens, status: 400 });
      expect((await json(res)).error).toMatchObject({ code: "invalid_request", message: expect.stringContaining("max_tokens") });
    }
    expect(t.mock.served).toHaveLength(0);
  });

  test("upstream 401, 402 and 403 'Key limit exceeded' on the operator's key are 502 upstream and mark no user", async () => {
    // The operator's key pays: its refusal is the operator's to fix (tests/routes/operator-key-refusal.test.ts).
    for (const status of [401, 402, 403]) {
      const t = await chatTestApp();
      await t.connect("alice", 5);
      const res = await t.chat(ask(`hi [[mock status=${status}]]`));
      expect(res.status).toBe(502);
      expect((await json(res)).error).toMatchObject({ code: "upstream", message: expect.stringContaining("the service's upstream key was refused") });
      expect((await t.deps.store.connections.find(t.appId, "alice"))!.fundingStatus).toBe("ok");
      expect((await t.chat(ask("hi"))).status).toBe(200);
    }
  });

  test("other upstream failures are 502 upstream with the upstream's status, and cost nothing", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    for (const directive of ["status=500", "status=429", "status=503", "error_200"]) {
      const res = await t.chat(ask(`hi [[mock ${directive}]]`));
      expect(res.status).toBe(502);
      const { error } = await json(res);
      expect(error.code).toBe("upstream");
      if (directive.startsWith("status=")) expect(error.message).toContain(directive.slice(7));
    }
    await t.flush();
    const status = await json(await t.get("/api/v1/status?appUserId=alice"));
    expect(status.usage.monthlyUsd).toBe(0);
    expect(status.remainingUsd).toBe(5);
  });

  test("an unreachable upstream is 502 and the reservation is released", async () => {
    const t = await chatTestApp({
      // As Bun's fetch fails when nothing listens: a TypeError with code ECONNREFUSED.
      fetchUpstream: async () => {
        throw Object.assign(new TypeError("ECONNREFUSED: Unable to connect. Is the computer able to access the url?"), { code: "ECONNREFUSED" });
      },
    });
    await t.connect("alice", 1);
    const res = await t.chat(ask("hi"));
    expect(res.status).toBe(502);
    expect((await json(res)).error.code).toBe("upstream");
    expect(await t.deps.budget.snapshot(`u/${t.appId}/2026-01/alice`)).toEqual({ spentNano: 0, reservedNano: 0 });
  });
});

describe("the hard cap", () => {
  test("max_tokens sent upstream is clamped to what the remaining budget affords", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 0.0001); // 100,000 nano: ~160 completion tokens after a small prompt
    const res = await t.chat(ask("hi", { max_tokens: 100_000 }));
    expect(res.status).toBe(200);
    const sent = t.mock.served.at(-1)!.body as { max_tokens: number };
    expect(sent.max_tokens).toBeGreaterThanOrEqual(16);
    expect(sent.max_tokens).toBeLessThan(170);
  });

  test("an absent max_tokens reserves and sends the default (4096), not the model's whole limit, and says so in a header", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 100);
    const res = await t.chat(ask("hi"));
    expect((t.mock.served.at(-1)!.body as { max_tokens: number }).max_tokens).toBe(4096);
    expect(res.headers.get("x-metering-max-tokens")).toBe("4096");
    const big = await t.chat({ ...ask("hi"), max_tokens: 100_000 });
    expect((t.mock.served.at(-1)!.body as { max_tokens: number }).max_tokens).toBe(16_384);
    expect(big.headers.get("x-metering-max-tokens")).toBe("16384");
  });

  test("402 budget_exceeded carries limit, used, remaining and resetsAt", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 0.000001); // 1,000 nano: not even the prompt fits
    const res = await t.chat(ask("hello there"));
    expect(res.status).toBe(402);
    const { error } = await json(res);
    expect(error).toMatchObject({ code: "budget_exceeded", limitUsd: 0.000001, usedUsd: 0, remainingUsd: 0.000001, resetsAt: "2026-02-01T00:00:00.000Z" });
    expect(t.mock.served).toHaveLength(0);
  });

  test("usage on 31 Jan 23:59:59 UTC and 1 Feb 00:00:01 UTC lands in different periods", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    t.clock.set(Date.UTC(2026, 0, 31, 23, 59, 59));
    const jan = await t.chat(ask("hi"));
    t.clock.set(Date.UTC(2026, 1, 1, 0, 0, 1));
    const feb = await t.chat(ask("hi"));
    await t.flush();
    expect((await t.deps.store.usageLedger.find(jan.headers.get("x-request-id")!))!.period).toBe("2026-01");
    expect((await t.deps.store.usageLedger.find(feb.headers.get("x-request-id")!))!.period).toBe("2026-02");
    const status = await json(await t.get("/api/v1/status?appUserId=alice"));
    expect(status.resetsAt).toBe("2026-03-01T00:00:00.000Z");
    const febRow = (await t.deps.store.usageLedger.find(feb.headers.get("x-request-id")!))!;
    expect(status.usage.monthlyUsd).toBeCloseTo(febRow.costNano / 1e9, 12);
  });

  test("100 concurrent streamed requests with a small cap: metered total never passes it", async () => {
    const t = await chatTestApp({ env: { RL_CHAT_LIMIT: "1000" } });
    const capUsd = 0.002;
    await t.connect("alice", capUsd);
    const responses = await Promise.all(
      Array.from({ length: 100 }, () => t.chat(ask("Tell me a story [[mock tokens=200 chunks=5]]", { stream: true, max_tokens: 400 }))),
    );
    const refused = responses.filter((r) => r.status === 402);
    const admitted = responses.filter((r) => r.status === 200);
    expect(admitted.length + refused.length).toBe(100);
    expect(refused.length).toBeGreaterThan(0);
    expect(admitted.length).toBeGreaterThan(0);
    for (const r of refused) expect((await json(r)).error.code).toBe("budget_exceeded");
    await Promise.all(admitted.map((r) => r.text()));
    await t.app.decorator.chat.idle(5000);
    await t.flush();
    const ledgerTotal = (t.db.query("SELECT sum(cost_nano) AS s FROM usage_ledger").get() as { s: number }).s;
    expect(ledgerTotal).toBeLessThanOrEqual(capUsd * 1e9);
    const status = await json(await t.get("/api/v1/status?appUserId=alice"));
    expect(Math.round(status.usage.monthlyUsd * 1e9)).toBe(ledgerTotal);
    expect(t.mock.served.length).toBe(admitted.length);
  });
});

describe("streams", () => {
  test("every relayed chunk validates against the upstream spec and usage is metered", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const res = await t.chat(ask("stream please [[mock keepalive_ms=1 pause_ms=2 chunks=4]]", { stream: true }));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = parseSseEvents(await res.text());
    const data = events.filter((e) => e.data !== undefined && e.data !== "[DONE]");
    expect(data.length).toBeGreaterThan(2);
    for (const e of data) expect(validateChatChunk(JSON.parse(e.data!))).toEqual([]);
    expect(events.some((e) => e.comment?.includes("OPENROUTER PROCESSING"))).toBe(true);
    await t.app.decorator.chat.idle(5000);
    await t.flush();
    const row = (await t.deps.store.usageLedger.find(res.headers.get("x-request-id")!))!;
    expect(row).toMatchObject({ source: "upstream", status: "ok", streamed: true });
    expect(row.costNano).toBeGreaterThan(0);
    const sent = t.mock.served.at(-1)!.body as Record<string, unknown>;
    expect(sent.stream_options).toEqual({ include_usage: true });
  });

  test("a mid-stream upstream error is relayed, and the row is what the upstream's record says it billed", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const res = await t.chat(ask("go [[mock mid_stream_error]]", { stream: true }));
    const text = await res.text();
    expect(text).toContain('"finish_reason":"error"');
    await t.app.decorator.chat.idle(5000);
    await t.flush();
    const row = (await t.deps.store.usageLedger.find(res.headers.get("x-request-id")!))!;
    const served = t.mock.served.at(-1)!;
    expect(row).toMatchObject({ status: "upstream_error_mid_stream", source: "generation", generationId: served.id });
    expect(row.costNano).toBe(usdToNanoCeil(served.costUsd));
  });

  test("a stream without a usage chunk is charged what the upstream's record says, marked generation", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const res = await t.chat(ask("go [[mock no_usage]]", { stream: true }));
    await res.text();
    await t.app.decorator.chat.idle(5000);
    await t.flush();
    const row = (await t.deps.store.usageLedger.find(res.headers.get("x-request-id")!))!;
    expect(row.source).toBe("generation");
    expect(row.costNano).toBe(usdToNanoCeil(t.mock.served.at(-1)!.costUsd));
    expect(row.costNano).toBeGreaterThan(0);
  });
});
