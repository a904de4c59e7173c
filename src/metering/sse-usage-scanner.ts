import { readError, readUsage, type UpstreamErrorInfo, type UpstreamUsage } from "./usage";

/** Lines longer than this are skipped rather than buffered: memory stays bounded. */
const MAX_LINE_CHARS = 2 * 1024 * 1024;

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
  private skippingLongLine = false;
  private skipLeadingLf = false;
  private data: string[] = [];

  feed(chunk: Uint8Array): void {
    this.feedText(this.decoder.decode(chunk, { stream: true }));
  }

  private feedText(text: string): void {
    if (this.skipLeadingLf && text.charCodeAt(0) === 10) text = text.slice(1);
    this.skipLeadingLf = false;
    if (text.includes("\r")) {
      // A CR at the end may be the first half of a CRLF split across chunks.
      this.skipLeadingLf = text.endsWith("\r");
      text = text.replace(/\r\n?/g, "\n");
    }
    if (this.partial) text = this.partial + text;
    let start = 0;
    let newline: number;
    while ((newline = text.indexOf("\n", start)) !== -1) {
      if (this.skippingLongLine) this.skippingLongLine = false;
      else this.line(text.slice(start, newline));
      start = newline + 1;
    }
    this.partial = start === 0 ? text : text.slice(start);
    if (this.partial.length > MAX_LINE_CHARS) {
      this.partial = "";
      this.skippingLongLine = true;
    }
  }

  /** The stream ended: an unterminated last event still counts (as browsers do not, but a metering pass must). */
  end(): void {
    const rest = this.decoder.decode();
    if (rest) this.feedText(rest);
    if (this.partial) this.line(this.partial);
    this.partial = "";
    if (this.data.length > 0) this.dispatch();
  }

  private line(line: string): void {
    if (line === "") {
      if (this.data.length > 0) this.dispatch();
      return;
    }
    if (line.charCodeAt(0) === 58 /* ":" comment, e.g. ": OPENROUTER PROCESSING" */) return;
    if (line.startsWith("data:")) this.data.push(line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5));
  }

  private dispatch(): void {
    const data = this.data.length === 1 ? this.data[0]! : this.data.join("\n");
    this.data = [];
    if (data === "[DONE]") {
      this.sawDone = true;
      return;
    }
    this.events++;
    if (this.generationId !== null && !data.includes('"usage"') && !data.includes('"error"')) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch {
      return; // A malformed event is relayed as it is; it just carries nothing we can meter.
    }
    const id = (parsed as { id?: unknown })?.id;
    if (this.generationId === null && typeof id === "string") this.generationId = id;
    this.usage = readUsage(parsed) ?? this.usage;
    this.error = readError(parsed) ?? this.error;
  }
}
