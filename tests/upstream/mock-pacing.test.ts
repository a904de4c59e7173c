/**
 * The mock's stream pacing (packages/mock-upstream/src/pacing.ts), which demo mode turns on so that
 * its answers visibly stream (DEMO_STREAM_TOKENS_PER_SECOND). No timing thresholds: the
 * tests count how a paced stream arrives (one read per chunk, keep-alives through a long
 * wait), compare its bytes and bill with an unpaced one, and check that a reader who leaves
 * is not kept waiting for a pace that would take minutes.
 */
import { describe, expect, test } from "bun:test";
import { BILLING_MODELS, completionText, createMockUpstream, startMockUpstream, type MockUpstreamOptions } from "../../packages/mock-upstream/src";
import { pacedMs } from "../../packages/mock-upstream/src/pacing";
import { ConfigError, loadConfig } from "../../src/config";
import { checkChatStream } from "../helpers/openrouter-spec";
import { ask, chatRequest, readEvents, record, untilRecorded } from "./generation-helpers";

const contentOf = (chunks: any[]) => chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
/** A stream's text with what differs between two generations (id, created) blanked. */
const sameShape = (raw: string) => raw.replace(/"id":"gen-[^"]+"/g, '"id":"gen"').replace(/"created":\d+/g, '"created":0');

/** Streams `body` through an in-process mock; the raw text, its chunks, and the mock's books for it. */
async function streamOnce(options: MockUpstreamOptions, body: Record<string, unknown>) {
  const mock = createMockUpstream(options);
  const response = await mock.fetch(chatRequest({ ...body, stream: true }));
  expect(response.status).toBe(200);
  const raw = await response.text();
  const checked = checkChatStream(raw);
  expect(checked.problems).toEqual([]);
  const id = response.headers.get("x-generation-id")!;
  await untilRecorded(mock, id);
  return { raw, chunks: checked.chunks, served: mock.served[0]!, data: await record(mock, id) };
}

describe("pacedMs: how long a streamed piece takes", () => {
  test("tokens over tokens a second; unpaced (0) waits nothing", () => {
    expect(pacedMs(1, 0)).toBe(0);
    expect(pacedMs(16, 0)).toBe(0);
    expect(pacedMs(0, 30)).toBe(0);
    expect(pacedMs(1, 20)).toBe(50);
    expect(pacedMs(3, 30)).toBe(100);
    expect(pacedMs(1, 0.5)).toBe(2000);
  });
});

describe("a paced stream", () => {
  test("over a socket, every content chunk arrives in a read of its own, in order", async () => {
    // Unpaced, the same chunks leave as fast as the socket takes them and are read together.
    const upstream = await startMockUpstream({ streamTokensPerSecond: 10 });
    try {
      const response = await fetch(`${upstream.url}/chat/completions`, {
        method: "POST",
        headers: { authorization: "Bearer sk-or-test", "content-type": "application/json" },
        body: JSON.stringify({ ...ask("[[mock tokens=4]]"), stream: true }),
      });
      // The content each read completed (its events up to the last blank line, after the earlier reads').
      const decoder = new TextDecoder();
      const contentPerRead: string[] = [];
      let text = "";
      let seen = "";
      for await (const bytes of response.body!) {
        text += decoder.decode(bytes, { stream: true });
        const content = contentOf(checkChatStream(text.slice(0, text.lastIndexOf("\n\n") + 2)).chunks);
        if (content !== seen) contentPerRead.push(content.slice(seen.length));
        seen = content;
      }
      expect(contentPerRead).toEqual(["Mock", " café", " reply", " 日本語"]);
      expect(seen).toBe(completionText(4));
    } finally {
      await upstream.stop();
    }
  });

  test("sends the same bytes and bills the same as an unpaced one", async () => {
    const body = ask("Say hello [[mock tokens=5]]");
    const paced = await streamOnce({ streamTokensPerSecond: 100 }, body);
    const unpaced = await streamOnce({}, body);
    expect(sameShape(paced.raw)).toBe(sameShape(unpaced.raw));
    expect(contentOf(paced.chunks)).toBe(completionText(5));
    const books = ({ served, data }: typeof paced) => ({
      costUsd: served.costUsd,
      promptTokens: served.promptTokens,
      completionTokens: served.completionTokens,
      deliveredTokens: served.deliveredTokens,
      completed: served.completed,
      totalCost: data.total_cost,
      tokensCompletion: data.tokens_completion,
    });
    expect(books(paced)).toEqual(books(unpaced));
    expect(paced.served.costUsd).toBeGreaterThan(0);
  });

  test("a reasoning model's reasoning is paced too, and billed the same", async () => {
    const body = { ...ask("[[mock tokens=3 reasoning=40]]"), model: "bill/reasoner" };
    const paced = await streamOnce({ models: [...BILLING_MODELS], streamTokensPerSecond: 1000 }, body);
    const unpaced = await streamOnce({ models: [...BILLING_MODELS] }, body);
    expect(sameShape(paced.raw)).toBe(sameShape(unpaced.raw));
    expect(paced.served.reasoningTokens).toBe(40);
    expect(paced.data.total_cost).toBe(unpaced.data.total_cost);
  });

  test("a piece whose pace takes over a second is preceded by OpenRouter's keep-alive comments", async () => {
    // One piece of 3 tokens at 2 a second: 1.5 s, with a keep-alive after the first second.
    const { raw, served } = await streamOnce({ streamTokensPerSecond: 2 }, ask("[[mock tokens=3 chunks=1]]"));
    const keepalive = raw.indexOf(": OPENROUTER PROCESSING");
    expect(keepalive).toBeGreaterThan(raw.indexOf('"role":"assistant"'));
    expect(keepalive).toBeLessThan(raw.indexOf(completionText(3)));
    expect(served.completed).toBe(true);
  });

  test("a reader who leaves is let go at once, not after the pace's wait, and billed what was produced", async () => {
    // 0.001 tokens a second: the first content piece alone would take over 16 minutes.
    const mock = createMockUpstream({ streamTokensPerSecond: 0.001 });
    const response = await mock.fetch(chatRequest({ ...ask("[[mock tokens=4 cancellable]]"), stream: true }));
    const reader = response.body!.getReader();
    await readEvents(reader, 1); // the role chunk
    await reader.cancel();
    const id = response.headers.get("x-generation-id")!;
    await untilRecorded(mock, id);
    expect(mock.served[0]).toMatchObject({ aborted: true, cancelled: true, deliveredTokens: 0, completed: false });
    expect((await record(mock, id)).tokens_completion).toBe(0);
  });
});

describe("DEMO_STREAM_TOKENS_PER_SECOND, the pace of demo mode's mock", () => {
  test("30 tokens a second unless set; 0 turns pacing off; negative, huge or not a number is refused", () => {
    expect(loadConfig({}).demoStreamTokensPerSecond).toBe(30);
    expect(loadConfig({ DEMO_STREAM_TOKENS_PER_SECOND: "0" }).demoStreamTokensPerSecond).toBe(0);
    expect(loadConfig({ DEMO_STREAM_TOKENS_PER_SECOND: "120" }).demoStreamTokensPerSecond).toBe(120);
    for (const bad of ["-1", "100001", "fast"]) {
      expect(() => loadConfig({ DEMO_STREAM_TOKENS_PER_SECOND: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ DEMO_STREAM_TOKENS_PER_SECOND: bad })).toThrow(/DEMO_STREAM_TOKENS_PER_SECOND/);
    }
  });
});
