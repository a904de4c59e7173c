/**
 * The service's scanner until issue 14's seventh session, kept for measurement only
 * (scripts/bench/sse-scanner.ts): it decoded every chunk to a string and searched that.
 * Same behaviour as src/upstream/sse-usage-scanner.ts, which now works on the bytes by
 * position and allocates nothing for a chunk of whole events (BENCHMARKS.md, issue 14).
 */
import { readError, readUsage, type UpstreamErrorInfo, type UpstreamUsage } from "../../../src/metering/usage";
import { jsonObjectAfter } from "../../../src/upstream/sse-usage-scanner";

/**
 * The longest line (and the most data of one event) kept to be parsed whole: the memory a
 * stream's scanner may hold. A usage chunk is under 1 KB in every shape OpenRouter sends
 * (its own chunk, or the finish chunk, whose delta is empty or a few tokens). A longer line
 * is a content chunk (a provider that sends a whole completion, or an image, at once), so
 * it is relayed untouched but not parsed; only its tail is kept, because OpenRouter writes
 * `usage` as a chunk's last field (spec/openrouter-openapi.yaml, ChatStreamChunk),
 * so a usage riding on a huge chunk is still read from there. 256 Ki chars is over 250
 * times any usage chunk, and a stream holds at most ~0.5 MB for it (UTF-16).
 */
export const MAX_LINE_CHARS = 256 * 1024;
/** How much of a skipped line's end is kept: room for a usage object (~0.5 KB) many times over. */
const SKIPPED_TAIL_CHARS = 8 * 1024;
/** The decoder's options for every chunk: one object, not one per chunk. */
const STREAMING = { stream: true };

/**
 * Finds the usage in an SSE stream while the same byte chunks go to the client: the relay
 * hands each chunk to `feed` and forwards it unchanged; nothing is copied or re-encoded.
 * Parsing follows the WHATWG HTML "server-sent events" rules: lines end in CRLF, LF or CR;
 * `data:` lines of one event are joined with LF; lines starting with `:` are comments.
 *
 * Only events that can carry what metering needs are JSON-parsed: the first one (for the
 * generation id) and those mentioning `usage` or `error`. The rest are just counted, which
 * is what an estimate needs if the usage never arrives.
 */
export class SseUsageScanner {
  generationId: string | null = null;
  usage: UpstreamUsage | null = null;
  error: UpstreamErrorInfo | null = null;
  /** Data events other than [DONE]: roughly the content chunks relayed. */
  events = 0;
  sawDone = false;

  private readonly decoder = new TextDecoder();
  private partial = "";
  /** Inside a line over MAX_LINE_CHARS: only its last SKIPPED_TAIL_CHARS are kept. */
  private skippingLongLine = false;
  private skippedTail = "";
  private skipLeadingLf = false;
  /**
   * The current event's data while it is one line (every event OpenRouter sends): where it
   * lies in a decoded chunk, not copied out of it. `dataEnd` is -1 when there is none.
   */
  private dataText = "";
  /**
   * Each text lines are read from (a chunk, a line begun in an earlier chunk, a multi-line
   * event's joined data) gets the next number, for KeySearch; `dataTextNo` is `dataText`'s.
   */
  private textNo = 0;
  private dataTextNo = 0;
  private dataStart = 0;
  private dataEnd = -1;
  /** An event of several data lines (rare): its lines, copied, the first one included. */
  private dataLines: string[] = [];
  private dataChars = 0;
  private readonly usageKey = new KeySearch('"usage"');
  private readonly errorKey = new KeySearch('"error"');
  /** The current event's data outgrew MAX_LINE_CHARS: counted, not parsed. */
  private oversizedEvent = false;

  feed(chunk: Uint8Array): void {
    this.feedText(this.decoder.decode(chunk, STREAMING));
  }

  private feedText(text: string): void {
    if (this.skipLeadingLf && text.charCodeAt(0) === 10) text = text.slice(1);
    this.skipLeadingLf = false;
    if (text.includes("\r")) {
      // A CR at the end may be the first half of a CRLF split across chunks.
      this.skipLeadingLf = text.endsWith("\r");
      text = text.replace(/\r\n?/g, "\n");
    }
    // Only the new text is searched for line ends, and a held partial line is only ever
    // appended to (a rope in JavaScriptCore, flattened once when its line ends), so a long
    // line costs linear time however finely it is chunked. A line is passed on as its
    // bounds in `text`, not as a string of its own: those strings were most of what a
    // stream's scanning allocated (BENCHMARKS.md, issue 14).
    const textNo = ++this.textNo;
    let start = 0;
    for (let newline = text.indexOf("\n"); newline !== -1; newline = text.indexOf("\n", start)) {
      if (this.skippingLongLine) this.endSkippedLine(text.slice(start, newline));
      else if (this.partial) {
        // The chunk's first line, begun in an earlier one: a text of its own.
        const line = this.partial + text.slice(start, newline);
        this.line(line, 0, line.length, ++this.textNo);
      } else this.line(text, start, newline, textNo);
      this.partial = "";
      start = newline + 1;
    }
    const rest = start === 0 ? text : text.slice(start);
    if (rest === "") return;
    if (this.skippingLongLine) {
      this.skippedTail = (this.skippedTail + rest).slice(-SKIPPED_TAIL_CHARS);
      return;
    }
    this.partial += rest;
    if (this.partial.length > MAX_LINE_CHARS) {
      // Too long to be anything but content: stop holding it (a long `data:` line still
      // counts as an event, for the estimate).
      if (this.partial.startsWith("data:")) this.oversizedEvent = true;
      this.skippedTail = this.partial.slice(-SKIPPED_TAIL_CHARS);
      this.partial = "";
      this.skippingLongLine = true;
    }
  }

  /** A skipped line ended: read a usage object at its end, if there is one. */
  private endSkippedLine(lastPiece: string): void {
    const tail = (this.skippedTail + lastPiece).slice(-SKIPPED_TAIL_CHARS);
    this.skippingLongLine = false;
    this.skippedTail = "";
    this.usage = readUsage({ usage: jsonObjectAfter(tail, '"usage":') }) ?? this.usage;
  }

  /** The stream ended: an unterminated last event still counts (as browsers do not, but a metering pass must). */
  end(): void {
    const rest = this.decoder.decode();
    if (rest) this.feedText(rest);
    if (this.skippingLongLine) this.endSkippedLine("");
    else if (this.partial) this.line(this.partial, 0, this.partial.length, ++this.textNo);
    this.partial = "";
    this.dispatch();
  }

  /** The line `text[start, end)`; `textNo` is the text's number. */
  private line(text: string, start: number, end: number, textNo: number): void {
    if (start === end) {
      this.dispatch();
      return;
    }
    if (text.charCodeAt(start) === 58 /* ":" comment, e.g. ": OPENROUTER PROCESSING" */) return;
    // "data:" holds no line end, so a match cannot run past `end`.
    if (!text.startsWith("data:", start) || this.oversizedEvent) return;
    const from = start + 5 < end && text.charCodeAt(start + 5) === 32 ? start + 6 : start + 5;
    this.dataChars += end - from + 1;
    if (this.dataChars > MAX_LINE_CHARS) {
      // Many short data lines can add up to a huge event too: same bound.
      this.oversizedEvent = true;
      this.dropData();
      return;
    }
    if (this.dataEnd === -1) {
      this.dataText = text;
      this.dataTextNo = textNo;
      this.dataStart = from;
      this.dataEnd = end;
      return;
    }
    if (this.dataLines.length === 0) this.dataLines.push(this.dataText.slice(this.dataStart, this.dataEnd));
    this.dataLines.push(text.slice(from, end));
  }

  private dropData(): void {
    this.dataText = "";
    this.dataEnd = -1;
    if (this.dataLines.length > 0) this.dataLines = [];
  }

  /** A blank line (or the end) dispatches the event, if it had data (WHATWG SSE). */
  private dispatch(): void {
    if (this.oversizedEvent) {
      this.oversizedEvent = false;
      this.dropData();
      this.dataChars = 0;
      this.events++;
      return;
    }
    if (this.dataEnd === -1) return;
    this.dataChars = 0;
    let text = this.dataText;
    let textNo = this.dataTextNo;
    let start = this.dataStart;
    let end = this.dataEnd;
    if (this.dataLines.length > 0) {
      text = this.dataLines.join("\n");
      textNo = ++this.textNo;
      start = 0;
      end = text.length;
    }
    this.dropData();
    if (end - start === 6 && text.startsWith("[DONE]", start)) {
      this.sawDone = true;
      return;
    }
    this.events++;
    if (this.generationId !== null && !this.usageKey.within(textNo, text, start, end) && !this.errorKey.within(textNo, text, start, end)) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(start === 0 && end === text.length ? text : text.slice(start, end));
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
 * Whether a range of a text holds `key`, for ranges asked about in order (the events of a
 * chunk). Where the key next occurs is remembered, so a chunk of many events is searched
 * once through, not once per event. Texts are told apart by a number the scanner gives
 * each one (comparing strings would compare their characters).
 */
class KeySearch {
  private textNo = -1;
  private next = -1;

  constructor(private readonly key: string) {}

  within(textNo: number, text: string, start: number, end: number): boolean {
    if (textNo !== this.textNo || (this.next !== -1 && this.next < start)) {
      this.textNo = textNo;
      this.next = text.indexOf(this.key, start);
    }
    return this.next !== -1 && this.next + this.key.length <= end;
  }
}
