import { describe, expect, test } from "bun:test";
import { MAX_LINE_CHARS, SseUsageScanner } from "../../src/upstream/sse-usage-scanner";

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

  test("a CRLF split across chunks is one line end, and an empty chunk between its halves changes nothing", () => {
    // CR | LF | LF: the second LF is the blank line that dispatches the event.
    const line = `data: ${JSON.stringify(usageChunk)}`;
    const s = scan([line + "\r", "\n", "", "\n", chunk(contentChunk("a"))]);
    expect(s.usage?.promptTokens).toBe(11);
    expect(s.events).toBe(2);
    // CR | empty | LF | "data…": the LF still belongs to the CR, so the event is not dispatched early.
    const t = scan(['data: {"id":"gen-1",\r', "", '\ndata: "choices":[]}\n\n']);
    expect(t.generationId).toBe("gen-1");
    expect(t.events).toBe(1);
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

  test("a UTF-8 BOM before the first line is dropped, also when split across chunks", () => {
    const bom = new Uint8Array([0xef, 0xbb, 0xbf]);
    const first = enc.encode(chunk(usageChunk));
    expect(scan([bom, first]).usage?.promptTokens).toBe(11);
    expect(scan([bom.subarray(0, 1), bom.subarray(1), first]).generationId).toBe("gen-1");
    // Only the first: a BOM later on is part of its line (not a data line, so ignored).
    const later = scan([chunk(contentChunk("a")), bom, first]);
    expect(later.events).toBe(1);
    expect(later.usage).toBeNull();
  });

  test("the start of a BOM that does not finish is part of the first line, as decoding would keep it", () => {
    const first = enc.encode(chunk(usageChunk));
    const notBom = new Uint8Array([0xef, 0xbb]);
    // "\uFFFDdata: …" is not a data line: nothing is read from it, split or not.
    for (const pieces of [[notBom, first], [notBom.subarray(0, 1), notBom.subarray(1), first], [new Uint8Array([...notBom, ...first])]]) {
      const s = scan(pieces);
      expect([s.usage, s.events]).toEqual([null, 0]);
    }
  });

  test("holds no view into a chunk after feed returns: the relay hands the chunk on to the client", () => {
    const text = chunk(contentChunk("a")) + chunk(usageChunk) + "data: [DONE]\n\n";
    // Split inside the usage event (once inside a data line, once between its lines), then
    // scribble over each chunk once fed, as a reused or transferred buffer would look.
    for (const cut of [text.indexOf("usage") + 3, text.lastIndexOf("\n\ndata: [DONE]") + 1]) {
      const scanner = new SseUsageScanner();
      for (const piece of [text.slice(0, cut), text.slice(cut)]) {
        const bytes = enc.encode(piece);
        scanner.feed(bytes);
        bytes.fill(0x7a);
      }
      scanner.end();
      expect(scanner.usage?.completionTokens).toBe(7);
      expect(scanner.sawDone).toBe(true);
    }
  });

  test("any split of a stream into chunks reads what the whole stream reads", () => {
    const mixed =
      ": OPENROUTER PROCESSING\r\n\r\n" +
      chunk(contentChunk("héllo ✓ ")) +
      chunk(contentChunk("wörld")).replaceAll("\n", "\r") +
      chunk(usageChunk).replaceAll("\n", "\r\n") +
      "data: [DONE]\n\n";
    const bytes = enc.encode(mixed);
    const whole = scan([bytes]);
    expect(whole.usage?.promptTokens).toBe(11);
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 200; round++) {
      const pieces: Uint8Array[] = [];
      for (let at = 0; at < bytes.length;) {
        const size = 1 + Math.floor(random() * 40);
        pieces.push(bytes.slice(at, at + size));
        at += size;
      }
      const split = scan(pieces);
      expect([split.usage, split.generationId, split.events, split.sawDone]).toEqual([whole.usage, whole.generationId, whole.events, whole.sawDone]);
    }
  });

  test("chunks of many events: every event that carries usage or an error is read, wherever it sits", () => {
    const usage = (completion: number) => ({ ...usageChunk, usage: { ...usageChunk.usage, completion_tokens: completion } });
    const error = { id: "gen-1", object: "chat.completion.chunk", choices: [], error: { code: 502, message: "provider hiccup" } };
    // The first chunk's usage is its last event and the second's its first, so a search
    // remembered from one chunk must not be reused for the next (nor for an equal one).
    const first = chunk(contentChunk("a")) + chunk(contentChunk("b")) + chunk(usage(3));
    const second = chunk(usage(5)) + chunk(contentChunk("c")) + chunk(error) + chunk(contentChunk("d"));
    const s = scan([first, second, second.replace(chunk(error), ""), "data: [DONE]\n\n"]);
    expect(s.usage?.completionTokens).toBe(5);
    expect(s.error?.message).toBe("provider hiccup");
    expect(s.events).toBe(3 + 4 + 3);
    const equal = scan([first, chunk(usage(9)) + chunk(contentChunk("e")), chunk(usage(9)) + chunk(contentChunk("e"))]);
    expect(equal.usage?.completionTokens).toBe(9);
    // An event of two data lines is joined into a text of its own; the events after it in
    // the same chunk are still searched in the chunk.
    const twoLines = `data: {"id":"gen-1","object":"chat.completion.chunk",\ndata: "choices":[]}\n\n`;
    const afterJoined = scan([chunk(contentChunk("e")) + twoLines + chunk(contentChunk("f")) + chunk(usage(11))]);
    expect(afterJoined.usage?.completionTokens).toBe(11);
    expect(afterJoined.events).toBe(4);
  });

  test("random streams of content, multi-line, comment, error and usage events, in random chunks, read as generated", () => {
    let seed = 11;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 150; round++) {
      let text = "";
      let events = 0;
      let lastUsage: number | undefined;
      let lastError: string | undefined;
      const count = 1 + Math.floor(random() * 12);
      for (let i = 0; i < count; i++) {
        const kind = random();
        if (kind < 0.15) text += ": keep-alive\n\n";
        else if (kind < 0.3) {
          // One event's JSON spread over two data lines, joined with a newline when read.
          text += `data: {"id":"gen-${round}","choices":[],\ndata: "n":${i}}\n\n`;
          events++;
        } else if (kind < 0.45) {
          lastUsage = i + 1;
          text += chunk({ ...usageChunk, id: `gen-${round}`, usage: { ...usageChunk.usage, completion_tokens: lastUsage } });
          events++;
        } else if (kind < 0.55) {
          lastError = `failure ${i}`;
          text += chunk({ id: `gen-${round}`, choices: [], error: { code: 502, message: lastError } });
          events++;
        } else {
          text += chunk({ ...contentChunk(`w${i} "usage" said`), id: `gen-${round}` });
          events++;
        }
      }
      text += "data: [DONE]\n\n";
      const bytes = enc.encode(text);
      const pieces: Uint8Array[] = [];
      for (let at = 0; at < bytes.length;) {
        const size = 1 + Math.floor(random() * (random() < 0.5 ? 30 : 600));
        pieces.push(bytes.slice(at, at + size));
        at += size;
      }
      for (const s of [scan([bytes]), scan(pieces)]) {
        expect([s.events, s.usage?.completionTokens, s.error?.message, s.generationId, s.sawDone]).toEqual([
          events,
          lastUsage,
          lastError,
          events > 0 ? `gen-${round}` : null,
          true,
        ]);
      }
    }
  });

  test("a usage key inside a string of a long line is not mistaken for the usage", () => {
    const fake = JSON.stringify({ prompt_tokens: 1, completion_tokens: 1, cost: 9 });
    const big = contentChunk("q".repeat(MAX_LINE_CHARS) + `"usage":${fake}`);
    const s = scan([chunk(big)]);
    expect(s.usage).toBeNull();
    expect(s.events).toBe(1);
  });
});
