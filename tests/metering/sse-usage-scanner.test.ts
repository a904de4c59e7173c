import { describe, expect, test } from "bun:test";
import { MAX_LINE_CHARS, SseUsageScanner } from "../../src/metering/sse-usage-scanner";

const enc = new TextEncoder();
const chunk = (obj: unknown) => `data: ${JSON.stringify(obj)}\n\n`;
const usageChunk = {
  id: "gen-1",
  object: "chat.completion.chunk",
  choices: [],
  usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18, cost: 0.000123 },
};
const contentChunk = (text: string) => ({ id: "gen-1", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: text } }] });

function scan(pieces: Array<string | Uint8Array>): SseUsageScanner {
  const s = new SseUsageScanner();
  for (const p of pieces) s.feed(typeof p === "string" ? enc.encode(p) : p);
  s.end();
  return s;
}

describe("SseUsageScanner", () => {
  test("finds usage in a final chunk with choices: []", () => {
    const s = scan([chunk(contentChunk("hi")), chunk(contentChunk(" there")), chunk(usageChunk), "data: [DONE]\n\n"]);
    expect(s.usage).toEqual({ promptTokens: 11, completionTokens: 7, costUsd: 0.000123 });
    expect(s.generationId).toBe("gen-1");
    expect(s.events).toBe(3);
    expect(s.sawDone).toBe(true);
  });

  test("finds usage in a final chunk with one empty choice", () => {
    const last = { ...usageChunk, choices: [{ index: 0, delta: {}, finish_reason: null }] };
    expect(scan([chunk(contentChunk("a")), chunk(last)]).usage?.completionTokens).toBe(7);
  });

  test("handles frames split at every byte, including inside a multi-byte character", () => {
    const text = ": OPENROUTER PROCESSING\n\n" + chunk(contentChunk("héllo ✓")) + chunk(usageChunk) + "data: [DONE]\n\n";
    const bytes = enc.encode(text);
    const s = scan([...bytes].map((b) => new Uint8Array([b])));
    expect(s.usage?.costUsd).toBe(0.000123);
    expect(s.events).toBe(2);
  });

  test("accepts CRLF and bare CR line endings, also split between chunks", () => {
    const crlf = chunk(usageChunk).replaceAll("\n", "\r\n");
    const half = crlf.length - 3; // split inside the final "\r\n\r\n"
    expect(scan([crlf.slice(0, half), crlf.slice(half)]).usage?.promptTokens).toBe(11);
    expect(scan([chunk(usageChunk).replaceAll("\n", "\r")]).usage?.promptTokens).toBe(11);
  });

  test("joins multi-line data fields with a newline before parsing", () => {
    const json =
      JSON.stringify(usageChunk, null, 1)
        .split("\n")
        .map((l) => `data: ${l}`)
        .join("\n") + "\n\n";
    expect(scan([json]).usage?.completionTokens).toBe(7);
  });

  test("records a mid-stream error chunk", () => {
    const err = {
      id: "gen-1",
      object: "chat.completion.chunk",
      error: { code: "server_error", message: "boom" },
      choices: [{ index: 0, delta: { content: "" }, finish_reason: "error" }],
    };
    const s = scan([chunk(contentChunk("partial")), chunk(err)]);
    expect(s.error).toEqual({ code: "server_error", message: "boom" });
    expect(s.usage).toBeNull();
  });

  test("survives bad JSON and a missing [DONE], and still counts events", () => {
    const s = scan(["data: {not json\n\n", chunk(contentChunk("x")), chunk(usageChunk)]);
    expect(s.events).toBe(3);
    expect(s.sawDone).toBe(false);
    expect(s.usage?.promptTokens).toBe(11);
  });

  test("an unterminated final event is still read at end()", () => {
    expect(scan([`data: ${JSON.stringify(usageChunk)}`]).usage?.promptTokens).toBe(11);
  });

  test("skips a line longer than its bound without buffering it, then carries on", () => {
    const huge = "data: " + "x".repeat(3 * 1024 * 1024) + "\n\n";
    const s = scan([huge.slice(0, 1_500_000), huge.slice(1_500_000), chunk(usageChunk)]);
    expect(s.usage?.completionTokens).toBe(7);
  });

  test("a usage riding at the end of a line too long to hold is still read from its tail", () => {
    const big = { ...usageChunk, choices: [{ index: 0, delta: { content: "y".repeat(MAX_LINE_CHARS * 2) }, finish_reason: "stop" }] };
    const text = chunk(contentChunk("a")) + chunk(big);
    const pieces: string[] = [];
    for (let i = 0; i < text.length; i += 65_536) pieces.push(text.slice(i, i + 65_536));
    const s = scan(pieces);
    expect(s.usage).toEqual({ promptTokens: 11, completionTokens: 7, costUsd: 0.000123 });
    expect(s.events).toBe(2);
  });

  test("a long line that is not the usage counts as one event and is not parsed", () => {
    const huge = "data: " + JSON.stringify(contentChunk("z".repeat(MAX_LINE_CHARS + 10))) + "\n\n";
    const s = scan([chunk(contentChunk("a")), huge, chunk(usageChunk), "data: [DONE]\n\n"]);
    expect(s.events).toBe(3);
    expect(s.usage?.completionTokens).toBe(7);
    expect(s.sawDone).toBe(true);
  });

  test("many short data lines adding up past the bound are dropped as one event, then scanning goes on", () => {
    const lines = "data: 0123456789\n".repeat(Math.ceil(MAX_LINE_CHARS / 10) + 10) + "\n";
    const s = scan([chunk(contentChunk("a")), lines, chunk(usageChunk)]);
    expect(s.events).toBe(3);
    expect(s.usage?.promptTokens).toBe(11);
  });

  test("a usage key inside a string of a long line is not mistaken for the usage", () => {
    const fake = JSON.stringify({ prompt_tokens: 1, completion_tokens: 1, cost: 9 });
    const big = contentChunk("q".repeat(MAX_LINE_CHARS) + `"usage":${fake}`);
    const s = scan([chunk(big)]);
    expect(s.usage).toBeNull();
    expect(s.events).toBe(1);
  });
});
