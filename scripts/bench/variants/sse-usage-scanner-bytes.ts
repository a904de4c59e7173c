/**
 * A byte-level variant of src/upstream/sse-usage-scanner.ts, kept for measurement only
 * (scripts/bench/sse-scanner.ts): lines and keys found in the bytes, only the events that
 * can carry usage decoded. Same behaviour (it passes the service scanner's tests), but it
 * measured slower under Bun 1.4.5: a Buffer view, a subarray and a byte search each cost
 * more than decoding the chunk and using string methods (BENCHMARKS.md, issue 14).
 */
import { readError, readUsage, type UpstreamErrorInfo, type UpstreamUsage } from "../../../src/metering/usage";
import { jsonObjectAfter } from "../../../src/upstream/sse-usage-scanner";

/**
 * The longest line (and the most data of one event), in bytes, kept to be parsed whole:
 * the memory a stream's scanner may hold. A usage chunk is under 1 KB in every shape
 * OpenRouter sends (its own chunk, or the finish chunk, whose delta is empty or a few
 * tokens). A longer line is a content chunk (a provider that sends a whole completion, or
 * an image, at once), so it is relayed untouched but not parsed; only its tail is kept,
 * because OpenRouter writes `usage` as a chunk's last field (spec/openrouter-openapi.yaml,
 * ChatStreamChunk), so a usage riding on a huge chunk is still read from there. 256 KiB
 * is over 250 times any usage chunk.
 */
export const MAX_LINE_BYTES = 256 * 1024;
/** The bound's earlier name, from when lines were decoded first; for ASCII the two agree. */
export const MAX_LINE_CHARS = MAX_LINE_BYTES;
/** How much of a skipped line's end is kept: room for a usage object (~0.5 KB) many times over. */
const SKIPPED_TAIL_BYTES = 8 * 1024;

const LF = 10;
const CR = 13;
const COLON = 58;
const DATA_PREFIX = Buffer.from("data:");
const DONE = Buffer.from("[DONE]");
const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);
/** Only events holding one of these can carry what metering needs (besides the first). */
const USAGE_KEY = Buffer.from('"usage"');
const ERROR_KEY = Buffer.from('"error"');
const EMPTY = Buffer.alloc(0);

/**
 * Finds the usage in an SSE stream while the same byte chunks go to the client: the relay
 * hands each chunk to `feed` and forwards it unchanged; nothing is copied or re-encoded.
 * Parsing follows the WHATWG HTML "server-sent events" rules: a leading BOM is dropped;
 * lines end in CRLF, LF or CR; `data:` lines of one event are joined with LF; lines
 * starting with `:` are comments.
 *
 * It works on bytes. Line ends, field names and the keys it looks for are ASCII, and in
 * UTF-8 an ASCII byte is never part of another character, so lines are found and events
 * told apart without decoding. Only events that can carry what metering needs are decoded
 * and JSON-parsed: the first one (for the generation id) and those holding `"usage"` or
 * `"error"`. The rest (the content chunks) are just counted, which is what an estimate
 * needs if the usage never arrives.
 */
export class SseUsageScanner {
  generationId: string | null = null;
  usage: UpstreamUsage | null = null;
  error: UpstreamErrorInfo | null = null;
  /** Data events other than [DONE]: roughly the content chunks relayed. */
  events = 0;
  sawDone = false;

  private readonly decoder = new TextDecoder();
  private firstLine = true;
  /** The start of a line the chunks so far have not ended (copies: chunks are not ours to hold). */
  private partial: Buffer[] = [];
  private partialBytes = 0;
  /** Inside a line over MAX_LINE_BYTES: only its last SKIPPED_TAIL_BYTES are kept. */
  private skippingLongLine = false;
  private skippedTail: Buffer = EMPTY;
  /** The last chunk ended in CR: a LF starting the next one is the same line end. */
  private skipLeadingLf = false;
  /** The current event's data lines (views into the chunk until `feed` returns; then copies). */
  private data: Buffer[] = [];
  private dataBytes = 0;
  /** The current event's data outgrew MAX_LINE_BYTES: counted, not parsed. */
  private oversizedEvent = false;

  feed(chunk: Uint8Array): void {
    let bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (this.skipLeadingLf && bytes[0] === LF) bytes = bytes.subarray(1);
    this.skipLeadingLf = false;
    const hasCr = bytes.indexOf(CR) !== -1;
    let start = 0;
    for (let end = nextLineEnd(bytes, 0, hasCr); end !== -1; end = nextLineEnd(bytes, start, hasCr)) {
      const piece = bytes.subarray(start, end);
      if (this.skippingLongLine) this.endSkippedLine(piece);
      else if (this.partialBytes > 0) this.line(Buffer.concat([...this.partial, piece]));
      else this.line(piece);
      this.partial = [];
      this.partialBytes = 0;
      start = end + 1;
      if (bytes[end] === CR) {
        if (start === bytes.length) this.skipLeadingLf = true;
        else if (bytes[start] === LF) start++;
      }
    }
    // What stays past this call is copied: the chunk goes on to the client.
    if (this.data.length > 0) this.data = this.data.map((value) => Buffer.from(value));
    if (start < bytes.length) this.holdRest(bytes.subarray(start));
  }

  /** The stream ended: an unterminated last event still counts (as browsers do not, but a metering pass must). */
  end(): void {
    if (this.skippingLongLine) this.endSkippedLine(EMPTY);
    else if (this.partialBytes > 0) this.line(Buffer.concat(this.partial));
    this.partial = [];
    this.partialBytes = 0;
    this.dispatch();
  }

  /** Keeps the unterminated end of a chunk, or once the line is too long, just its tail. */
  private holdRest(rest: Buffer): void {
    if (this.skippingLongLine) {
      this.skippedTail = lastBytes(this.skippedTail, rest);
      return;
    }
    this.partial.push(Buffer.from(rest));
    this.partialBytes += rest.length;
    if (this.partialBytes > MAX_LINE_BYTES) {
      // Too long to be anything but content: stop holding it (a long `data:` line still
      // counts as an event, for the estimate).
      const held = Buffer.concat(this.partial);
      if (startsWith(this.withoutBom(held), DATA_PREFIX)) this.oversizedEvent = true;
      this.skippedTail = lastBytes(EMPTY, held);
      this.partial = [];
      this.partialBytes = 0;
      this.skippingLongLine = true;
    }
  }

  /** A skipped line ended: read a usage object at its end, if there is one. */
  private endSkippedLine(lastPiece: Buffer): void {
    const tail = this.decoder.decode(lastBytes(this.skippedTail, lastPiece));
    this.skippingLongLine = false;
    this.skippedTail = EMPTY;
    this.usage = readUsage({ usage: jsonObjectAfter(tail, '"usage":') }) ?? this.usage;
  }

  /** The stream's first line loses a UTF-8 BOM (the decoding step of WHATWG SSE). */
  private withoutBom(line: Buffer): Buffer {
    if (!this.firstLine) return line;
    this.firstLine = false;
    return startsWith(line, UTF8_BOM) ? line.subarray(UTF8_BOM.length) : line;
  }

  private line(raw: Buffer): void {
    const line = this.withoutBom(raw);
    if (line.length === 0) {
      this.dispatch();
      return;
    }
    if (line[0] === COLON /* comment, e.g. ": OPENROUTER PROCESSING" */) return;
    if (!startsWith(line, DATA_PREFIX) || this.oversizedEvent) return;
    const value = line.subarray(line[DATA_PREFIX.length] === 32 ? DATA_PREFIX.length + 1 : DATA_PREFIX.length);
    this.dataBytes += value.length + 1;
    if (this.dataBytes > MAX_LINE_BYTES) {
      // Many short data lines can add up to a huge event too: same bound.
      this.oversizedEvent = true;
      this.data = [];
      return;
    }
    this.data.push(value);
  }

  /** A blank line (or the end) dispatches the event, if it had data (WHATWG SSE). */
  private dispatch(): void {
    if (this.oversizedEvent) {
      this.oversizedEvent = false;
      this.data = [];
      this.dataBytes = 0;
      this.events++;
      return;
    }
    if (this.data.length === 0) return;
    const data = this.data;
    this.data = [];
    this.dataBytes = 0;
    if (data.length === 1 && data[0]!.equals(DONE)) {
      this.sawDone = true;
      return;
    }
    this.events++;
    // The keys are ASCII and hold no newline, so no key spans two data lines.
    if (this.generationId !== null && !data.some((value) => value.includes(USAGE_KEY) || value.includes(ERROR_KEY))) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(data.map((value) => this.decoder.decode(value)).join("\n"));
    } catch {
      return; // A malformed event is relayed as it is; it just carries nothing we can meter.
    }
    const id = (parsed as { id?: unknown })?.id;
    if (this.generationId === null && typeof id === "string") this.generationId = id;
    this.usage = readUsage(parsed) ?? this.usage;
    this.error = readError(parsed) ?? this.error;
  }
}

/** Where the next line ends at or after `from` (its CR or LF), or -1. */
function nextLineEnd(bytes: Buffer, from: number, hasCr: boolean): number {
  const lf = bytes.indexOf(LF, from);
  if (!hasCr) return lf;
  const cr = bytes.indexOf(CR, from);
  if (cr === -1) return lf;
  return lf === -1 || cr < lf ? cr : lf;
}

function startsWith(bytes: Buffer, prefix: Buffer): boolean {
  return bytes.length >= prefix.length && bytes.compare(prefix, 0, prefix.length, 0, prefix.length) === 0;
}

/** The last SKIPPED_TAIL_BYTES of `held` followed by `more` (a fresh copy). */
function lastBytes(held: Buffer, more: Buffer): Buffer {
  if (more.length >= SKIPPED_TAIL_BYTES) return Buffer.from(more.subarray(more.length - SKIPPED_TAIL_BYTES));
  const keep = Math.min(held.length, SKIPPED_TAIL_BYTES - more.length);
  return Buffer.concat([held.subarray(held.length - keep), more]);
}
