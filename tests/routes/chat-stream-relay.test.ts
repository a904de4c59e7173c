import { describe, expect, test } from "bun:test";
import { chatTestApp, handDrivenUpstream, type ChatTestApp } from "../helpers/chat-app";
import { userBudgetTarget } from "../../src/services/budget-target";
import type { ChatRequest } from "../../src/services/chat";

const MODEL = "openai/gpt-4o-mini";
const body = { model: MODEL, messages: [{ role: "user", content: "hi" }], stream: true, max_tokens: 50 };
const frame = (obj: unknown) => `data: ${JSON.stringify(obj)}\n\n`;
const content = (text: string) =>
  frame({ id: "gen-hand", object: "chat.completion.chunk", created: 1, model: MODEL, choices: [{ index: 0, delta: { content: text }, finish_reason: null }] });
const usage = frame({
  id: "gen-hand",
  object: "chat.completion.chunk",
  created: 1,
  model: MODEL,
  choices: [],
  usage: { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12, cost: 0.0000042 },
});
const dec = new TextDecoder();

async function started(env: Record<string, string> = {}) {
  const upstream = handDrivenUpstream();
  const t = await chatTestApp({ fetchUpstream: upstream.fetchUpstream, env });
  await t.connect("alice", 5);
  const res = await t.chat(body);
  expect(res.status).toBe(200);
  return { t, upstream, res, reader: res.body!.getReader() };
}

async function rowOf(t: Awaited<ReturnType<typeof chatTestApp>>, res: Response) {
  await t.app.decorator.chat.idle(10_000);
  await t.flush();
  return (await t.deps.store.usageLedger.find(res.headers.get("x-request-id")!))!;
}

describe("stream relay", () => {
  test("the client holds each chunk before the upstream has sent the next one (no buffering)", async () => {
    const { upstream, reader } = await started();
    upstream.send(": OPENROUTER PROCESSING\n\n");
    expect(dec.decode((await reader.read()).value)).toBe(": OPENROUTER PROCESSING\n\n");
    upstream.send(content("Hel"));
    expect(dec.decode((await reader.read()).value)).toBe(content("Hel"));
    // Nothing more was sent: the next read is still pending while we send the next chunk.
    const pending = reader.read();
    upstream.send(content("lo"));
    expect(dec.decode((await pending).value)).toBe(content("lo"));
  });

  test("chunks pass through byte for byte with their boundaries, even mid-frame", async () => {
    const { upstream, reader, t, res } = await started();
    const whole = content("a✓b") + usage + "data: [DONE]\n\n";
    const bytes = new TextEncoder().encode(whole);
    const cuts = [0, 7, 20, 21, 22, bytes.length - 5, bytes.length];
    const received: Uint8Array[] = [];
    // Cuts at 21 and 22 fall inside the three bytes of "✓".
    for (let i = 1; i < cuts.length; i++) upstream.send(bytes.slice(cuts[i - 1], cuts[i]));
    upstream.end();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      received.push(value);
    }
    expect(received.map((c) => c.length)).toEqual(cuts.slice(1).map((c, i) => c - cuts[i]!));
    expect(dec.decode(Buffer.concat(received))).toBe(whole);
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ source: "upstream", costNano: 4200, status: "ok", generationId: "gen-hand" });
  });

  test("a client that disconnects mid-stream still produces a row: the usage is read while draining", async () => {
    const { upstream, reader, t, res } = await started();
    upstream.send(content("partial"));
    await reader.read();
    await reader.cancel();
    upstream.send(content(" rest"));
    upstream.send(usage);
    upstream.end();
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ status: "client_disconnected", source: "upstream", costNano: 4200 });
  });

  test("when the usage never comes after a disconnect, the upstream's record of the generation is charged", async () => {
    const { upstream, reader, t, res } = await started();
    upstream.send(content("partial"));
    await reader.read();
    await reader.cancel();
    upstream.end();
    upstream.records.set("gen-hand", 0.0000077);
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ status: "client_disconnected", source: "generation", generationId: "gen-hand", costNano: 7700 });
  });

  test("with no record of the generation in time, its whole reservation is charged: never less than the upstream could bill", async () => {
    const { upstream, reader, t, res } = await started({ RECONCILE_GIVE_UP_SECONDS: "0" });
    upstream.send(content("partial"));
    await reader.read();
    await reader.cancel();
    upstream.end();
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ status: "client_disconnected", source: "reservation" });
    expect(row.costNano).toBe(row.reservedNano!);
    expect(row.costNano).toBeGreaterThan(0);
  });

  test("until its record is found, a call whose usage was not seen keeps its reservation held", async () => {
    const { upstream, reader, t, res } = await started();
    upstream.send(content("partial"));
    await reader.read();
    await reader.cancel();
    upstream.end();
    await rowOf(t, res);
    expect(await t.deps.store.usageLedger.find(res.headers.get("x-request-id")!)).toBeNull();
    const held = await t.deps.budget.snapshot(`u/${t.appId}/2026-01/alice`);
    expect(held.reservedNano).toBeGreaterThan(0);
    expect(held.spentNano).toBe(0);
    // The record appears, and the next look finds it (the reconciler backs off: 2 s after its first miss).
    upstream.records.set("gen-hand", 0.0000042);
    t.clock.advance(2000);
    expect(await rowOf(t, res)).toMatchObject({ source: "generation", costNano: 4200 });
    expect(await t.deps.budget.snapshot(`u/${t.appId}/2026-01/alice`)).toEqual({ spentNano: 4200, reservedNano: 0 });
  });

  test("an upstream that resets mid-stream errors the client stream and is settled from its record", async () => {
    const { upstream, reader, t, res } = await started();
    upstream.send(content("partial"));
    await reader.read();
    upstream.fail(new Error("ECONNRESET"));
    await expect(reader.read()).rejects.toBeDefined();
    upstream.records.set("gen-hand", 0.0000031);
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ status: "upstream_reset", source: "generation", costNano: 3100 });
  });

  test("an upstream that stalls past the timeout is cut, and the client stream ends in an error", async () => {
    const upstream = handDrivenUpstream();
    const t = await chatTestApp({ fetchUpstream: upstream.fetchUpstream, env: { UPSTREAM_TIMEOUT_MS: "200", RECONCILE_GIVE_UP_SECONDS: "0" } });
    await t.connect("alice", 5);
    const res = await t.chat(body);
    const reader = res.body!.getReader();
    upstream.send(content("partial"));
    await reader.read();
    // The hand-driven upstream ignores the abort signal, like a stuck peer; the relay must not wait on it.
    await expect(reader.read()).rejects.toBeDefined();
    const row = await rowOf(t, res);
    expect(row.status).toBe("upstream_stalled");
  });

  test("an open stream does not keep its client's request alive (the prompt may be large)", async () => {
    const upstream = handDrivenUpstream();
    const t = await chatTestApp({ fetchUpstream: upstream.fetchUpstream });
    await t.connect("alice", 5);
    const { res, request, requestId } = await streamCalledDirectly(t);
    const reader = res.body!.getReader();
    upstream.send(content("Hel"));
    expect(dec.decode((await reader.read()).value)).toBe(content("Hel"));
    // The stream is open and its metering still to come; only what settles it is kept.
    for (let i = 0; i < 10 && request.deref(); i++) {
      Bun.gc(true);
      await Bun.sleep(1);
    }
    expect(request.deref()).toBeUndefined();
    upstream.send(usage);
    upstream.end();
    while (!(await reader.read()).done);
    await t.flush();
    expect(await t.deps.store.usageLedger.find(requestId)).toMatchObject({ source: "upstream", costNano: 4200, status: "ok" });
  });
});

/** Starts a stream through the chat service itself, so that the test holds its request only weakly. */
async function streamCalledDirectly(t: ChatTestApp): Promise<{ res: Response; request: WeakRef<ChatRequest>; requestId: string }> {
  const requestId = crypto.randomUUID();
  const request: ChatRequest = {
    requestId,
    target: await userBudgetTarget(t.deps.store.connections, t.deps.clock, t.appId, "alice"),
    body: { ...body, messages: [{ role: "user", content: "a long prompt ".repeat(10_000) }] },
    bodyBytes: 200_000,
    clientHeaders: new Headers(),
  };
  const res = await t.app.decorator.chat.complete(request);
  expect(res.status).toBe(200);
  return { res, request: new WeakRef(request), requestId };
}
