/**
 * The structural bounds of a JSON request body, checked on its text before it is parsed.
 *
 * Parsing is not what costs: what comes after it walks the parsed value recursively
 * (Elysia's body cleaning, TypeBox's checks, the ValidationError that serialises the whole
 * body into its message, our own JSON.stringify of the upstream body), and each of those
 * costs per value. 200 KB of `[` then `]` (10^5 levels) overflowed the stack in Elysia's
 * ValidationError after seconds of blocking the event loop; 4 MB of `0,` (2 × 10^6 values)
 * took 0.3 to 1.6 s to refuse. So both the depth and the number of values are bounded here,
 * in one pass over the text with no recursion and nothing allocated per character.
 *
 * The scan reads the decoded text that JSON.parse is then given, so what is counted is what
 * is parsed: its structural characters (RFC 8259 §2) are compared as UTF-16 code units,
 * and string contents are skipped by a native search for the closing quote.
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
export function jsonBoundExceeded(text: string, maxDepth = MAX_JSON_DEPTH, maxValues = MAX_JSON_VALUES): string | null {
  if (maxDepth > MAX_JSON_DEPTH) throw new RangeError(`maxDepth above ${MAX_JSON_DEPTH}`);
  let depth = 0;
  let values = 0;
  // Whether the next token starts a value: at the start, after `[`, `:`, and `,` in an
  // array. After `{` and `,` in an object a key comes instead, which is not counted.
  let valueNext = true;
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const char = text.charCodeAt(i);
    switch (char) {
      case SPACE:
      case TAB:
      case LINE_FEED:
      case CARRIAGE_RETURN:
        continue;
      case QUOTE:
        if (valueNext) values++;
        valueNext = false;
        i = closingQuote(text, i + 1);
        break;
      case OPEN_ARRAY:
      case OPEN_OBJECT:
        values++;
        if (++depth > maxDepth) return `request body nests deeper than ${maxDepth} levels`;
        openContainers[depth] = char;
        valueNext = char === OPEN_ARRAY;
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
        // The first character of a number, `true`, `false` or `null`; its others come after
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
 * end of the text). The first quote is found by a native search, with no JavaScript step
 * per character: most strings hold no escaped quote. When the quote found is escaped (an
 * odd run of backslashes before it), the rest of the string is stepped through character
 * by character, skipping each escaped one: a search per escaped quote would cost a call
 * for every two characters of `\"\"\"…` (measured on 4 MiB of them: 6.5 ms a MiB, against
 * under 1.2 stepping; scripts/bench/hostile-bodies.ts).
 */
function closingQuote(text: string, from: number): number {
  const quote = text.indexOf('"', from);
  if (quote === -1) return text.length;
  let backslashes = 0;
  while (quote - backslashes > from && text.charCodeAt(quote - backslashes - 1) === BACKSLASH) backslashes++;
  if (backslashes % 2 === 0) return quote;
  const length = text.length;
  for (let at = quote + 1; at < length; at++) {
    const char = text.charCodeAt(at);
    if (char === QUOTE) return at;
    if (char === BACKSLASH) at++;
  }
  return length;
}
