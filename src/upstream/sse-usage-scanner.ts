import { readError, readUsage, type UpstreamErrorInfo, type UpstreamUsage } from "../pricing/usage";
import { concatBytes, equalsAt, indexOfBytes, lastBytes, startsWithAt } from "./sse-bytes";

/**
 * The longest line (and the most data of one event), in bytes, kept to be parsed whole: the
 * memory a stream's scanner may hold. A usage chunk is under 1 KB in every shape OpenRouter
 * sends (its own chunk, or the finish chunk, whose delta is empty or a few tokens). A longer
 * line is a content chunk (a provider that sends a whole completion, or an image, at once),
 * so it is relayed untouched but not parsed; only its tail is kept, because OpenRouter
 * writes `usage` as a chunk's last field (spec/openrouter-openapi.yaml, ChatStreamChunk),
 * so a usage riding on a huge chunk is still read from there. 256 KiB is over 250 times any
 * usage chunk. (Named in characters when the scanner decoded first; for ASCII they agree.)
 */
export const MAX_LINE_CHARS = 256 * 1024;
/** How much of a skipped line's end is kept: room for a usage object (~0.5 KB) many times over. */
const SKIPPED_TAIL_BYTES = 8 * 1024;

const LF = 10;
const CR = 13;
const COLON = 58;
const SPACE = 32;
const ascii = (text: string) => new TextEncoder().encode(text);
const DATA_FIELD = ascii("data:");
const DONE = ascii("[DONE]");
const UTF8_BOM = new Uint8Array([0xef, 0xbb, 0xbf]);
const NOTHING: Uint8Array = new Uint8Array(0);
/** Only whole lines and events are decoded, never a chunk's end, so one decoder serves every stream. */
const UTF8 = new TextDecoder();

/**
 * Finds the usage in an SSE stream while the same byte chunks go to the client: the relay
 * hands each chunk to `feed` and forwards it unchanged; nothing is copied or re-encoded.
 * Parsing follows the WHATWG HTML "server-sent events" rules: a leading BOM is dropped;
 * lines end in CRLF, LF or CR; `data:` lines of one event are joined with LF; lines
 * starting with `:` are comments.
 *
 * It works on the chunk's bytes, by position. Line ends, the field name and the keys it
 * looks for are ASCII, and in UTF-8 an ASCII byte is never part of another character, so
 * lines are found and events told apart without decoding. Only events that can carry what
 * metering needs are decoded and JSON-parsed: the first one (for the generation id) and
 * those holding `"usage"` or `"error"`. The rest (the content chunks) are just counted,
 * which is what an estimate needs if the usage never arrives. A chunk of whole events, what
 * OpenRouter sends, allocates nothing here: decoding every chunk to a string was most of
 * what scanning cost in CPU and garbage (ARCHITECTURE.md §7 "SSE scanner on bytes").
 */
export class SseUsageScanner {
  generationId: string | null = null;
  usage: UpstreamUsage | null = null;
  error: UpstreamErrorInfo | null = null;
  /** Data events other than [DONE]: roughly the content chunks relayed. */
  events = 0;
  sawDone = false;

  /** How many bytes of a BOM the stream has begun with; -1 once past the stream's start. */
  private bomBytes = 0;
  /** The start of a line the chunks so far have not ended (copies: chunks are not ours to hold). */
  private partial: Uint8Array[] = [];
  private partialBytes = 0;
  /** Inside a line over MAX_LINE_CHARS: only its last SKIPPED_TAIL_BYTES are kept. */
  private skippingLongLine = false;
  private skippedTail: Uint8Array = NOTHING;
  /** The last chunk ended in CR: a LF starting the next one is the same line end. */
  private skipLeadingLf = false;
  /**
   * The current event's data while it is one line (every event OpenRouter sends): where it
   * lies in `dataBytes`, a chunk while `feed` runs, a copy after. `dataEnd` is -1 when none.
   */
  private dataBytes: Uint8Array = NOTHING;
  private dataBytesNo = 0;
  private dataStart = 0;
  private dataEnd = -1;
  /** An event of several data lines (rare): its lines, copied, the first one included. */
  private dataLines: Uint8Array[] = [];
  private dataLength = 0;
  /**
   * Each byte array lines are read from (a chunk, a line begun in an earlier chunk, a
   * multi-line event's joined data, a held copy) gets the next number, for KeySearch.
   */
  private bytesNo = 0;
  private readonly usageKey = new KeySearch(ascii('"usage"'));
  private readonly errorKey = new KeySearch(ascii('"error"'));
  /** The current event's data outgrew MAX_LINE_CHARS: counted, not parsed. */
  private oversizedEvent = false;

  feed(chunk: Uint8Array): void {
    let start = this.bomBytes === -1 ? 0 : this.skipBom(chunk);
    // An empty chunk says nothing about whether the CR's LF follows.
    if (this.skipLeadingLf && start < chunk.length) {
      if (chunk[start] === LF) start++;
      this.skipLeadingLf = false;
    }
    const chunkNo = ++this.bytesNo;
    // Where the next CR is, searched again only once passed: OpenRouter ends lines with LF,
    // so for its chunks this is one search that finds none.
    let cr = chunk.indexOf(CR, start);
    for (;;) {
      if (cr !== -1 && cr < start) cr = chunk.indexOf(CR, start);
      const lf = chunk.indexOf(LF, start);
      const end = cr !== -1 && (lf === -1 || cr < lf) ? cr : lf;
      if (end === -1) break;
      if (this.skippingLongLine) this.endSkippedLine(chunk.subarray(start, end));
      else if (this.partialBytes > 0) {
        // The chunk's first line, begun in an earlier one: joined into an array of its own.
        this.partial.push(chunk.subarray(start, end));
        const line = concatBytes(this.partial);
        this.partial = [];
        this.partialBytes = 0;
        this.line(line, 0, line.length, ++this.bytesNo);
      } else this.line(chunk, start, end, chunkNo);
      start = end + 1;
      if (chunk[end] === CR) {
        if (start === chunk.length) this.skipLeadingLf = true;
        else if (chunk[start] === LF) start++;
      }
    }
    // Nothing of the chunk is held past this call: it goes on to the client.
    if (this.dataEnd !== -1 && this.dataBytes === chunk) {
      this.dataBytes = chunk.slice(this.dataStart, this.dataEnd);
      this.dataBytesNo = ++this.bytesNo;
      this.dataStart = 0;
      this.dataEnd = this.dataBytes.length;
    }
    if (start < chunk.length) this.holdRest(chunk.subarray(start));
  }

  /** The stream ended: an unterminated last event still counts (as browsers do not, but a metering pass must). */
  end(): void {
    if (this.bomBytes > 0) this.holdRest(UTF8_BOM.subarray(0, this.bomBytes));
    this.bomBytes = -1;
    if (this.skippingLongLine) this.endSkippedLine(NOTHING);
    else if (this.partialBytes > 0) {
      const line = concatBytes(this.partial);
      this.line(line, 0, line.length, ++this.bytesNo);
    }
    this.partial = [];
    this.partialBytes = 0;
    this.dispatch();
  }

  /**
   * The stream's first bytes lose a UTF-8 BOM, also one split across chunks (the decoding
   * step of WHATWG SSE). Returns where the chunk's lines start.
   */
  private skipBom(chunk: Uint8Array): number {
    let at = 0;
    while (at < chunk.length && this.bomBytes < UTF8_BOM.length && chunk[at] === UTF8_BOM[this.bomBytes]) {
      at++;
      this.bomBytes++;
    }
    if (this.bomBytes === UTF8_BOM.length) this.bomBytes = -1;
    else if (at < chunk.length) {
      // Not a BOM after all: what looked like its start belongs to the first line.
      if (this.bomBytes > 0) this.holdRest(UTF8_BOM.subarray(0, this.bomBytes));
      this.bomBytes = -1;
    }
    return at;
  }

  /** Keeps the unterminated end of a chunk (copied), or once the line is too long, just its tail. */
  private holdRest(rest: Uint8Array): void {
    if (this.skippingLongLine) {
      this.skippedTail = lastBytes(this.skippedTail, rest, SKIPPED_TAIL_BYTES);
      return;
    }
    this.partial.push(rest.slice());
    this.partialBytes += rest.length;
    if (this.partialBytes > MAX_LINE_CHARS) {
      // Too long to be anything but content: stop holding it (a long `data:` line still
      // counts as an event, for the estimate).
      const held = concatBytes(this.partial);
      if (startsWithAt(held, 0, held.length, DATA_FIELD)) this.oversizedEvent = true;
      this.skippedTail = lastBytes(NOTHING, held, SKIPPED_TAIL_BYTES);
      this.partial = [];
      this.partialBytes = 0;
      this.skippingLongLine = true;
    }
  }

  /** A skipped line ended: read a usage object at its end, if there is one. */
  private endSkippedLine(lastPiece: Uint8Array): void {
    const tail = UTF8.decode(lastBytes(this.skippedTail, lastPiece, SKIPPED_TAIL_BYTES));
    this.skippingLongLine = false;
    this.skippedTail = NOTHING;
    this.usage = readUsage({ usage: jsonObjectAfter(tail, '"usage":') }) ?? this.usage;
  }

  /** The line `bytes[start, end)`; `bytesNo` is the array's number. */
  private line(bytes: Uint8Array, start: number, end: number, bytesNo: number): void {
    if (start === end) {
      this.dispatch();
      return;
    }
    if (bytes[start] === COLON /* comment, e.g. ": OPENROUTER PROCESSING" */) return;
    if (!startsWithAt(bytes, start, end, DATA_FIELD) || this.oversizedEvent) return;
    const from = start + 5 < end && bytes[start + 5] === SPACE ? start + 6 : start + 5;
    this.dataLength += end - from + 1;
    if (this.dataLength > MAX_LINE_CHARS) {
      // Many short data lines can add up to a huge event too: same bound.
      this.oversizedEvent = true;
      this.dropData();
      return;
    }
    if (this.dataEnd === -1) {
      this.dataBytes = bytes;
      this.dataBytesNo = bytesNo;
      this.dataStart = from;
      this.dataEnd = end;
      return;
    }
    if (this.dataLines.length === 0) this.dataLines.push(this.dataBytes.slice(this.dataStart, this.dataEnd));
    this.dataLines.push(bytes.slice(from, end));
  }

  private dropData(): void {
    this.dataBytes = NOTHING;
    this.dataEnd = -1;
    if (this.dataLines.length > 0) this.dataLines = [];
  }

  /** A blank line (or the end) dispatches the event, if it had data (WHATWG SSE). */
  private dispatch(): void {
    if (this.oversizedEvent) {
      this.oversizedEvent = false;
      this.dropData();
      this.dataLength = 0;
      this.events++;
      return;
    }
    if (this.dataEnd === -1) return;
    this.dataLength = 0;
    let bytes = this.dataBytes;
    let bytesNo = this.dataBytesNo;
    let start = this.dataStart;
    let end = this.dataEnd;
    if (this.dataLines.length > 0) {
      bytes = concatBytes(this.dataLines, LF);
      bytesNo = ++this.bytesNo;
      start = 0;
      end = bytes.length;
    }
    this.dropData();
    if (equalsAt(bytes, start, end, DONE)) {
      this.sawDone = true;
      return;
    }
    this.events++;
    if (this.generationId !== null && !this.usageKey.within(bytesNo, bytes, start, end) && !this.errorKey.within(bytesNo, bytes, start, end)) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(UTF8.decode(bytes.subarray(start, end)));
    } catch {
      return; // A malformed event is relayed as it is; it just carries nothing we can meter.
    }
    const id = (parsed as { id?: unknown })?.id;
    if (this.generationId === null && typeof id === "string") this.generationId = id;
    this.usage = readUsage(parsed) ?? this.usage;
    this.error = readError(parsed) ?? this.error;
  }
}

/**
 * Whether a range of a byte array holds `key`, for ranges asked about in order (the events
 * of a chunk). Where the key next occurs is remembered, so a chunk of many events is
 * searched once through, not once per event. Arrays are told apart by a number the scanner
 * gives each one, not by identity: a reused buffer would be the same object.
 */
class KeySearch {
  private bytesNo = -1;
  private next = -1;

  constructor(private readonly key: Uint8Array) {}

  within(bytesNo: number, bytes: Uint8Array, start: number, end: number): boolean {
    if (bytesNo !== this.bytesNo || (this.next !== -1 && this.next < start)) {
      this.bytesNo = bytesNo;
      this.next = indexOfBytes.call(bytes, this.key, start);
    }
    return this.next !== -1 && this.next + this.key.length <= end;
  }
}

/**
 * The JSON object that follows the last `key` in `text`, parsed; null if there is none or
 * it is cut off. Braces inside strings are skipped, so only the object's own end counts.
 */
function jsonObjectAfter(text: string, key: string): unknown {
  const at = text.lastIndexOf(key);
  if (at === -1) return null;
  const open = text.indexOf("{", at + key.length);
  if (open === -1 || text.slice(at + key.length, open).trim() !== "") return null;
  let depth = 0;
  let inString = false;
  for (let i = open; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* backslash */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 /* { */) depth++;
    else if (c === 125 /* } */ && --depth === 0) {
      try {
        return JSON.parse(text.slice(open, i + 1));
      } catch {
        return null;
      }
    }
  }
  return null;
}
