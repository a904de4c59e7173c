/**
 * The structural bounds of a JSON request body, checked on its bytes before it is parsed.
 *
 * Parsing is not what costs: what comes after it walks the parsed value recursively
 * (Elysia's body cleaning, TypeBox's checks, the ValidationError that serialises the whole
 * body into its message, our own JSON.stringify of the upstream body), and each of those
 * costs per value. 200 KB of `[` then `]` (10^5 levels) overflowed the stack in Elysia's
 * ValidationError after seconds of blocking the event loop; 4 MB of `0,` (2 × 10^6 values)
 * took 0.3 to 1.6 s to refuse. So both the depth and the number of values are bounded here,
 * in one pass over the bytes with no recursion and nothing allocated per byte.
 *
 * The bytes are scanned as UTF-8 without decoding: every byte of a multi-byte sequence is
 * 0x80 or above, so the ASCII bytes that give JSON its structure (RFC 8259 §2) are never
 * part of one, and a decoder that meets invalid bytes replaces them without swallowing the
 * ASCII byte after them (WHATWG Encoding, UTF-8 decoder), so the text that is parsed has the
 * structure that was scanned.
 */

/**
 * Deepest nesting accepted, the root object being level 1. A real request nests far less:
 * a tool's JSON schema (`tools[].function.parameters`) or `response_format.json_schema`
 * spends about two levels per level of the schema (`properties`, then the property), on top
 * of the five levels down to the schema itself, so 64 leaves room for a schema nested some
 * 25 deep; OpenAI accepts fewer for structured outputs. Everything recursive after the
 * parse (JavaScriptCore's JSON.stringify, TypeBox's errors) handles 20,000 levels here.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * Most values accepted in one body (every object, array, string, number, true, false and
 * null; keys are not counted). A long agent conversation, 2,048 messages half of which are
 * tool calls, with 128 tools of 50 parameters each, holds about 41,000
 * (tests/helpers/heavy-chat-request.ts). What follows the parse costs up to about 0.3 us a
 * value (Elysia's cleaning, its ValidationError, which serialises the whole body into its
 * message in development mode): under 30 ms at this bound, against 0.2 to 0.5 s on a
 * server, 1.6 s in process, for the 2 million values 4 MB can hold
 * (scripts/bench/hostile-bodies.ts).
 */
export const MAX_JSON_VALUES = 100_000;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const COMMA = 0x2c;
const COLON = 0x3a;
const SPACE = 0x20;
const TAB = 0x09;
const LINE_FEED = 0x0a;
const CARRIAGE_RETURN = 0x0d;

/** Which container each open level is (OPEN_ARRAY or OPEN_OBJECT); reused, as scans never interleave. */
const openContainers = new Uint8Array(MAX_JSON_DEPTH + 1);

/**
 * Why the body is refused, or null when it is within the bounds. Malformed JSON is not this
 * function's business: it is counted as well as it can be and left for the parser to refuse.
 */
export function jsonBoundExceeded(bytes: Uint8Array, maxDepth = MAX_JSON_DEPTH, maxValues = MAX_JSON_VALUES): string | null {
  if (maxDepth > MAX_JSON_DEPTH) throw new RangeError(`maxDepth above ${MAX_JSON_DEPTH}`);
  let depth = 0;
  let values = 0;
  // Whether the next token starts a value: at the start, after `[`, `:`, and `,` in an
  // array. After `{` and `,` in an object a key comes instead, which is not counted.
  let valueNext = true;
  const length = bytes.length;
  for (let i = 0; i < length; i++) {
    const byte = bytes[i]!;
    switch (byte) {
      case SPACE:
      case TAB:
      case LINE_FEED:
      case CARRIAGE_RETURN:
        continue;
      case QUOTE:
        if (valueNext) values++;
        valueNext = false;
        i = closingQuote(bytes, i + 1);
        break;
      case OPEN_ARRAY:
      case OPEN_OBJECT:
        values++;
        if (++depth > maxDepth) return `request body nests deeper than ${maxDepth} levels`;
        openContainers[depth] = byte;
        valueNext = byte === OPEN_ARRAY;
        break;
      case CLOSE_ARRAY:
      case CLOSE_OBJECT:
        if (depth > 0) depth--;
        valueNext = false;
        break;
      case COMMA:
        valueNext = depth > 0 && openContainers[depth] === OPEN_ARRAY;
        break;
      case COLON:
        valueNext = true;
        break;
      default:
        // The first byte of a number, `true`, `false` or `null`; its other bytes come after
        // valueNext is cleared, so a token is counted once.
        if (valueNext) values++;
        valueNext = false;
    }
    if (values > maxValues) return `request body holds more than ${maxValues} JSON values`;
  }
  return null;
}

/**
 * The index of the quote that closes the string whose contents start at `from` (or the
 * end of the bytes). The first quote is found by a native search, with no JavaScript step
 * per byte: most strings hold no escaped quote. When the quote found is escaped (an odd
 * run of backslashes before it), the rest of the string is stepped through byte by byte,
 * skipping each escaped byte: a search per escaped quote would cost a call for every two
 * bytes of `\"\"\"…` (measured on 4 MiB of them: 6.5 ms a MiB, against under 1.2 stepping;
 * scripts/bench/hostile-bodies.ts).
 */
function closingQuote(bytes: Uint8Array, from: number): number {
  const quote = bytes.indexOf(QUOTE, from);
  if (quote === -1) return bytes.length;
  let backslashes = 0;
  while (quote - backslashes > from && bytes[quote - backslashes - 1] === BACKSLASH) backslashes++;
  if (backslashes % 2 === 0) return quote;
  const length = bytes.length;
  for (let at = quote + 1; at < length; at++) {
    const byte = bytes[at];
    if (byte === QUOTE) return at;
    if (byte === BACKSLASH) at++;
  }
  return length;
}
