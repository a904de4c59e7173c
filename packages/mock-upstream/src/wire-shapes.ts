/**
 * Legal but unusual ways to write an SSE event, for the `comments`, `multiline_data`,
 * `bad_json` and `big_line` scenarios. Each follows the WHATWG HTML "server-sent events"
 * interpretation rules (https://html.spec.whatwg.org/multipage/server-sent-events.html):
 * a line starting with ":" is a comment and is ignored; the values of several `data:`
 * lines of one event are joined with a single LF; one space after the colon is dropped.
 */

/**
 * Comments a reader must skip. Not OpenRouter's keep-alive text, and one of them has no
 * space after the colon, one is a bare colon and one looks like a data line.
 */
const COMMENTS = [": mock comment", ":no-space comment", ":", ': data: {"not":"an event"}'];

/** The comment line written before the `n`th data event (without its line end). */
export function commentLine(n: number): string {
  return COMMENTS[n % COMMENTS.length]!;
}

/**
 * Writes one JSON payload as several `data:` lines, breaking it after every comma that is
 * outside a string. Joined again with LF (the spec's rule) it is the same JSON value, since
 * LF is JSON whitespace there; a break inside a string would not be.
 */
export function multilineDataLines(json: string, lineEnd: string): string {
  const lines: string[] = [];
  let inString = false;
  let from = 0;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (inString) {
      if (c === 92 /* backslash */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) {
      inString = true;
    } else if (c === 44 /* , */) {
      lines.push(json.slice(from, i + 1));
      from = i + 1;
    }
  }
  lines.push(json.slice(from));
  return lines.map((line) => "data: " + line).join(lineEnd);
}

/** A chunk cut short: its data is not JSON. Readers must relay it and carry on. */
export function badJsonPayload(id: string): string {
  return `{"id":${JSON.stringify(id)},"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"cut off`;
}

/** 21 bytes of UTF-8 mixing 1-, 2-, 3- and 4-byte characters, so readers meet them split. */
const PADDING_UNIT = "café 日本語 🙂 ";
const PADDING_UNIT_BYTES = new TextEncoder().encode(PADDING_UNIT).length;

/**
 * Text of exactly `bytes` UTF-8 bytes (0 when `bytes` <= 0): the unit repeated, then ASCII.
 * Tests call it too, to know to the byte what the big line carried.
 */
export function paddingText(bytes: number): string {
  if (bytes <= 0) return "";
  const units = Math.floor(bytes / PADDING_UNIT_BYTES);
  return PADDING_UNIT.repeat(units) + "x".repeat(bytes - units * PADDING_UNIT_BYTES);
}
