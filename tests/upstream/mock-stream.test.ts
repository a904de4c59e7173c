/**
 * The mock upstream's SSE streams and stream scenarios. Every data payload is validated
 * against the spec's ChatStreamChunk (checkChatStream). No timing thresholds: tests assert
 * the order of events, and "still pending" only ever after the fact.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { completionText, createMockUpstream, startMockUpstream, type RunningMockUpstream } from "../../packages/mock-upstream/src";
import { paddingText } from "../../packages/mock-upstream/src/wire-shapes";
import { checkChatStream } from "../helpers/openrouter-spec";

const AUTH = { authorization: "Bearer sk-or-test", "content-type": "application/json" };

function body(text: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ model: "openai/gpt-4o-mini", stream: true, messages: [{ role: "user", content: text }], ...extra });
}

function streamRequest(text: string, extra: Record<string, unknown> = {}, signal?: AbortSignal): Request {
  return new Request("http://mock.local/api/v1/chat/completions", { method: "POST", headers: AUTH, body: body(text, extra), signal });
}

async function readAll(response: Response): Promise<{ writes: Uint8Array[]; text: string }> {
  const writes: Uint8Array[] = [];
  for await (const write of response.body!) writes.push(write);
  return { writes, text: new TextDecoder().decode(Buffer.concat(writes)) };
}

/** Streams a request through the in-process mock and checks every chunk against the spec. */
async function streamed(text: string, extra: Record<string, unknown> = {}) {
  const mock = createMockUpstream();
  const response = await mock.fetch(streamRequest(text, extra));
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toBe("text/event-stream");
  const { writes, text: raw } = await readAll(response);
  const checked = checkChatStream(raw);
  expect(checked.problems).toEqual([]);
  return { mock, response, writes, raw, ...checked };
}

const deltaOf = (chunk: any) => chunk.choices[0]?.delta;
const contentChunks = (chunks: any[]) => chunks.filter((c) => c.choices[0]?.delta?.content);
const contentOf = (chunks: any[]) => chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");

describe("streamed completions", () => {
  test("role, content pieces, finish, usage with choices: [], then [DONE]", async () => {
    const { mock, response, chunks, done, events } = await streamed("hi");
    const served = mock.served[0]!;
    expect(response.headers.get("x-generation-id")).toBe(served.id);
    expect(response.headers.get("x-ratelimit-remaining")).not.toBeNull();
    expect(chunks.every((c: any) => c.id === served.id && c.object === "chat.completion.chunk")).toBe(true);

    expect(deltaOf(chunks[0])).toEqual({ role: "assistant", content: "" });
    const contents = contentChunks(chunks);
    expect(contents).toHaveLength(16);
    expect(contentOf(chunks)).toBe(completionText(16));
    const finish = chunks.at(-2) as any;
    expect(finish.choices[0].finish_reason).toBe("stop");
    const usage = chunks.at(-1) as any;
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toMatchObject({ prompt_tokens: served.promptTokens, completion_tokens: 16, cost: served.costUsd });
    expect(usage.usage.cost).toBeCloseTo(served.promptTokens * 0.00000015 + 16 * 0.0000006, 15);
    expect(done).toBe(true);
    expect(events.at(-1)).toEqual({ data: "[DONE]" });
    expect(served).toMatchObject({ stream: true, completed: true, aborted: false, deliveredTokens: 16 });
  });

  test("chunks=N spreads tokens=M over N content chunks", async () => {
    const { chunks } = await streamed("[[mock tokens=10 chunks=3]]");
    expect(contentChunks(chunks)).toHaveLength(3);
    expect(contentOf(chunks)).toBe(completionText(10));
  });

  test("max_tokens cuts the stream with finish_reason length", async () => {
    const { chunks } = await streamed("[[mock tokens=10]]", { max_tokens: 3 });
    expect(contentOf(chunks)).toBe(completionText(3));
    expect((chunks.at(-2) as any).choices[0].finish_reason).toBe("length");
    expect((chunks.at(-1) as any).usage.completion_tokens).toBe(3);
  });

  test("usage_shape=empty_choice sends usage beside one choice with an empty delta", async () => {
    const { chunks } = await streamed("[[mock tokens=2 usage_shape=empty_choice]]");
    const usage = chunks.at(-1) as any;
    expect(usage.usage.completion_tokens).toBe(2);
    expect(usage.choices).toHaveLength(1);
    expect(usage.choices[0]).toMatchObject({ delta: { content: "" }, finish_reason: null });
  });

  test("usage_shape=in_finish puts usage on the finish chunk", async () => {
    const { chunks } = await streamed("[[mock tokens=2 usage_shape=in_finish]]");
    const last = chunks.at(-1) as any;
    expect(last.choices[0].finish_reason).toBe("stop");
    expect(last.usage.completion_tokens).toBe(2);
    expect(chunks.filter((c: any) => c.usage)).toHaveLength(1);
  });

  test("no_cost, no_usage and no_done", async () => {
    const noCost = await streamed("[[mock tokens=2 no_cost]]");
    const usage = (noCost.chunks.at(-1) as any).usage;
    expect(usage.completion_tokens).toBe(2);
    expect("cost" in usage).toBe(false);

    const noUsage = await streamed("[[mock tokens=2 no_usage]]");
    expect(noUsage.chunks.some((c: any) => c.usage)).toBe(false);
    expect(noUsage.done).toBe(true);
    expect((noUsage.chunks.at(-1) as any).choices[0].finish_reason).toBe("stop");

    const noDone = await streamed("[[mock tokens=2 no_done]]");
    expect(noDone.done).toBe(false);
    expect((noDone.chunks.at(-1) as any).usage.completion_tokens).toBe(2);
    expect(noDone.mock.served[0]!.completed).toBe(true);
  });

  test("crlf ends every line with CRLF", async () => {
    const { raw, chunks } = await streamed("[[mock tokens=3 crlf]]");
    expect(raw).toContain("\r\n\r\n");
    expect(raw.replaceAll("\r\n", "")).not.toMatch(/[\r\n]/);
    expect(contentOf(chunks)).toBe(completionText(3));
  });

  test("pause_ms with keepalive_ms sends OPENROUTER PROCESSING comments before each data chunk", async () => {
    // pause 20 / keep-alive 5 → comments at 5, 10 and 15 ms of each pause, then the chunk.
    const { events } = await streamed("[[mock tokens=2 pause_ms=20 keepalive_ms=5]]");
    const shape = events.map((e) => (e.comment === "OPENROUTER PROCESSING" ? "c" : e.data === "[DONE]" ? "D" : "d")).join("");
    expect(shape).toBe("cccd" + "cccd" + "cccd" + "dd" + "D");
  });
});

describe("stream failures", () => {
  test("mid_stream_error: after some content, a chunk with error and finish_reason error, then the end", async () => {
    const { chunks, done, mock } = await streamed("[[mock tokens=6 mid_stream_error after=2]]");
    expect(contentChunks(chunks)).toHaveLength(2);
    const last = chunks.at(-1) as any;
    expect(last.error).toMatchObject({ code: 502, message: expect.any(String) });
    expect(last.choices[0].finish_reason).toBe("error");
    expect(done).toBe(false);
    expect(chunks.some((c: any) => c.usage)).toBe(false);
    expect(mock.served[0]).toMatchObject({ completed: false, aborted: false, deliveredTokens: 2 });
  });

  test("reset_mid_stream errors the body after some content (in-process)", async () => {
    const mock = createMockUpstream();
    const response = await mock.fetch(streamRequest("[[mock tokens=6 reset_mid_stream after=3]]"));
    const reader = response.body!.getReader();
    const seen: string[] = [];
    const decoder = new TextDecoder();
    const error = await (async () => {
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return null;
          seen.push(decoder.decode(value));
        }
      } catch (err) {
        return err as Error & { code?: string };
      }
    })();
    expect(error?.code).toBe("ECONNRESET");
    const checked = checkChatStream(seen.join(""));
    expect(checked.problems).toEqual([]);
    expect(contentOf(checked.chunks)).toBe(completionText(3));
    expect(mock.served[0]).toMatchObject({ completed: false, deliveredTokens: 3 });
  });

  test("stall_mid_stream sends some chunks, then nothing until the reader cancels", async () => {
    const mock = createMockUpstream();
    const response = await mock.fetch(streamRequest("[[mock tokens=6 stall_mid_stream after=2]]"));
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    for (let i = 0; i < 3; i++) decoder.decode((await reader.read()).value); // role + 2 content chunks
    const next = reader.read();
    const first = await Promise.race([next.then(() => "data"), Bun.sleep(30).then(() => "pending")]);
    expect(first).toBe("pending");
    await reader.cancel();
    expect((await next).done).toBe(true);
    expect(mock.served[0]).toMatchObject({ completed: false, aborted: true, deliveredTokens: 2 });
  });

  test("stall_mid_stream with keepalive_ms sends only comments after the stall", async () => {
    const mock = createMockUpstream();
    const response = await mock.fetch(streamRequest("[[mock tokens=4 stall_mid_stream after=1 keepalive_ms=2]]"));
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    for (let i = 0; i < 2 + 3; i++) text += decoder.decode((await reader.read()).value);
    await reader.cancel();
    const checked = checkChatStream(text);
    expect(checked.problems).toEqual([]);
    expect(checked.events.map((e) => (e.comment ? "c" : "d")).join("")).toBe("ddccc");
  });

  test("aborting the request's signal fails the body with its reason", async () => {
    const mock = createMockUpstream();
    const controller = new AbortController();
    const response = await mock.fetch(streamRequest("[[mock tokens=4 stall_mid_stream]]", {}, controller.signal));
    const reader = response.body!.getReader();
    await reader.read();
    controller.abort(new Error("caller aborted"));
    await expect(reader.read()).rejects.toThrow("caller aborted");
    expect(mock.served[0]).toMatchObject({ completed: false, aborted: true });
  });
});

describe("split_frames", () => {
  test("cuts writes inside `data:`, inside a UTF-8 character and between an event's line ends", async () => {
    const plain = await streamed("[[mock tokens=6]]");
    const split = await streamed("[[mock tokens=6 split_frames]]");
    const bytes = (w: Uint8Array) => new TextDecoder().decode(w);
    expect(split.writes.length).toBeGreaterThan(plain.writes.length);
    expect(split.writes.some((w) => bytes(w).endsWith("dat"))).toBe(true);
    expect(split.writes.some((w) => bytes(w).startsWith("\ndat"))).toBe(true);
    const strict = new TextDecoder("utf-8", { fatal: true });
    expect(
      split.writes.some((w) => {
        try {
          strict.decode(w);
          return false;
        } catch {
          return true;
        }
      }),
    ).toBe(true);
    // Reassembled, it is the same stream.
    expect(contentOf(split.chunks)).toBe(contentOf(plain.chunks));
    expect(split.chunks).toHaveLength(plain.chunks.length);
    expect(split.done).toBe(true);
  });

  test("with crlf, a CR and its LF arrive in different writes", async () => {
    const { writes, chunks } = await streamed("[[mock tokens=3 split_frames crlf]]");
    const texts = writes.map((w) => Buffer.from(w).toString("latin1"));
    expect(texts.some((t, i) => t.endsWith("\r") && texts[i + 1]?.startsWith("\n"))).toBe(true);
    expect(contentOf(chunks)).toBe(completionText(3));
  });
});

describe("streams over HTTP (startMockUpstream)", () => {
  let upstream: RunningMockUpstream;
  beforeAll(async () => {
    upstream = await startMockUpstream();
  });
  afterAll(() => upstream.stop());

  const post = (text: string, signal?: AbortSignal) => fetch(`${upstream.url}/chat/completions`, { method: "POST", headers: AUTH, body: body(text), signal });

  test("a split, CRLF stream with keep-alives arrives whole and valid", async () => {
    const response = await post("[[mock tokens=5 split_frames crlf pause_ms=4 keepalive_ms=2]]");
    const checked = checkChatStream(await response.text());
    expect(checked.problems).toEqual([]);
    expect(checked.done).toBe(true);
    expect(contentOf(checked.chunks)).toBe(completionText(5));
    expect(checked.events.some((e) => e.comment === "OPENROUTER PROCESSING")).toBe(true);
    expect(upstream.mock.served.at(-1)).toMatchObject({ completed: true, deliveredTokens: 5 });
  });

  test("reset_mid_stream cuts the connection after some content", async () => {
    const response = await post("[[mock tokens=6 reset_mid_stream]]");
    expect(response.status).toBe(200);
    await expect(response.text()).rejects.toThrow();
    expect(upstream.mock.served.at(-1)).toMatchObject({ completed: false, deliveredTokens: 3 });
  });

  test("a client that goes away mid-stall is seen by the mock", async () => {
    const controller = new AbortController();
    const response = await post("[[mock tokens=4 stall_mid_stream keepalive_ms=5]]", controller.signal);
    const reader = response.body!.getReader();
    await reader.read();
    controller.abort();
    const entry = upstream.mock.served.at(-1)!;
    while (!entry.aborted) await Bun.sleep(5);
    expect(entry.completed).toBe(false);
  });
});

describe("unusual but legal wire shapes", () => {
  test("comments puts a non-keep-alive comment before every data event, between and inside events", async () => {
    const plain = await streamed("[[mock tokens=3]]");
    const { raw, events, chunks, done } = await streamed("[[mock tokens=3 comments]]");
    expect(done).toBe(true);
    const comments = events.filter((e) => e.comment !== undefined).map((e) => e.comment);
    // One per JSON data event (role, 3 content, finish, usage), none the keep-alive text.
    expect(comments).toHaveLength(6);
    expect(comments).not.toContain("OPENROUTER PROCESSING");
    expect(comments).toContain("");
    expect(raw).toContain(":no-space comment\n");
    // Inside an event: a comment line directly followed by the event's data line.
    expect(raw).toMatch(/\n:[^\n]*\ndata: /);
    expect(chunks).toHaveLength(plain.chunks.length);
    expect(contentOf(chunks)).toBe(completionText(3));
  });

  test("multiline_data splits every JSON event over several data: lines that join back with LF", async () => {
    const { raw, chunks, done } = await streamed("[[mock tokens=4 multiline_data]]");
    const events = raw.split("\n\n").filter((e) => e.startsWith("data: {"));
    expect(events.length).toBe(1 + 4 + 2);
    for (const event of events) expect(event.split("\n").length).toBeGreaterThan(3);
    expect(contentOf(chunks)).toBe(completionText(4));
    expect((chunks.at(-1) as any).usage.completion_tokens).toBe(4);
    expect(done).toBe(true);
  });

  test("multiline_data with crlf joins lines with CRLF", async () => {
    const { raw, chunks } = await streamed("[[mock tokens=2 multiline_data crlf]]");
    expect(raw).toContain(",\r\ndata: ");
    expect(raw.replaceAll("\r\n", "")).not.toMatch(/[\r\n]/);
    expect(contentOf(chunks)).toBe(completionText(2));
  });

  test("bad_json sends one event whose data is not JSON, after the role chunk, then carries on", async () => {
    const mock = createMockUpstream();
    const response = await mock.fetch(streamRequest("[[mock tokens=3 bad_json]]"));
    const raw = (await readAll(response)).text;
    const checked = checkChatStream(raw);
    expect(checked.problems).toHaveLength(1);
    expect(checked.problems[0]).toContain("event 1: data is not JSON");
    expect(contentOf(checked.chunks)).toBe(completionText(3));
    expect(checked.done).toBe(true);
    expect(mock.served[0]).toMatchObject({ completed: true, deliveredTokens: 3 });
  });

  test("big_line=N makes the first content chunk's data line exactly N bytes, in valid UTF-8", async () => {
    const size = 300_000;
    const { raw, chunks, mock } = await streamed(`[[mock tokens=3 big_line=${size}]]`);
    const line = raw.split("\n").find((l) => l.startsWith("data: ") && new TextEncoder().encode(l).length >= size)!;
    expect(new TextEncoder().encode(line).length).toBe(size);
    const first = contentChunks(chunks)[0] as any;
    const content: string = first.choices[0].delta.content;
    expect(content.startsWith(completionText(1) + "café 日本語 🙂 ")).toBe(true);
    const padding = content.slice(completionText(1).length);
    expect(padding).toBe(paddingText(new TextEncoder().encode(padding).length));
    // The padding is not tokens: usage and the served log count the planned completion.
    expect((chunks.at(-1) as any).usage.completion_tokens).toBe(3);
    expect(mock.served[0]!.deliveredTokens).toBe(3);
  });

  test("big_line needs a byte count within bounds", async () => {
    const response = await createMockUpstream().fetch(streamRequest("[[mock big_line=0]]"));
    expect(response.status).toBe(400);
  });
});

test("pad_lines=N pads every content chunk's data line to N bytes", async () => {
  const { raw, chunks } = await streamed("[[mock tokens=6 chunks=3 pad_lines=5000]]");
  const lines = raw.split("\n").filter((l) => l.startsWith("data: ") && l.includes('"content":"') && !l.includes('"content":""'));
  expect(lines).toHaveLength(3);
  for (const line of lines) expect(new TextEncoder().encode(line).length).toBe(5000);
  expect(contentChunks(chunks)).toHaveLength(3);
});
