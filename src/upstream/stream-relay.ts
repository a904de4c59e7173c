import { SseUsageScanner } from "./sse-usage-scanner";

export type RelayStatus = "ok" | "upstream_error_mid_stream" | "client_disconnected" | "upstream_stalled" | "upstream_reset";

export interface RelayOptions {
  /** Longest silence (not even a keep-alive comment) tolerated from the upstream. */
  stallTimeoutMs: number;
  /** After the client left, how long to keep reading for the usage chunk. */
  drainTimeoutMs: number;
  /** Sees every upstream chunk, relayed or drained (the idempotency recorder keeps them). */
  onChunk?: (chunk: Uint8Array) => void;
  /**
   * Set when the generation id is not known yet (no X-Generation-Id header): called with it
   * once a chunk carries it, and that chunk is relayed only when this resolves, so the call
   * journal has the id before the answer's first event reaches the client.
   */
  identify?: (generationId: string) => Promise<void>;
}

type RelayDone = (status: RelayStatus, scanner: SseUsageScanner) => void;
/** What the relay uses of the upstream body's reader. */
interface UpstreamReader {
  read(): Promise<UpstreamRead>;
  cancel(reason?: unknown): Promise<void>;
}
type UpstreamRead = { done: false; value: Uint8Array } | { done: true; value?: Uint8Array };

/**
 * Relays an upstream SSE body to the client chunk for chunk: the very Uint8Array read from
 * the upstream is enqueued to the client, after the scanner has looked at it (no tee(),
 * which would buffer for the slower branch, and no re-encoding). highWaterMark 0 means the
 * upstream is only read when the client is ready, so a slow client slows the upstream
 * instead of growing memory.
 *
 * When the client disconnects, reading goes on without forwarding for at most
 * `drainTimeoutMs`, to catch the usage chunk. `onDone` runs exactly once, with the status
 * and what the scanner found.
 */
export function relayStream(
  upstreamBody: ReadableStream<Uint8Array>,
  upstreamAbort: AbortController,
  options: RelayOptions,
  onDone: RelayDone,
): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>(new StreamRelay(upstreamBody.getReader(), upstreamAbort, options, onDone), { highWaterMark: 0 });
}

/**
 * The relay's state and the stream's underlying source in one object. Every stream stays
 * open as long as its client reads, so what one holds is multiplied by thousands: the
 * source's methods live on the prototype, the stall timer gets the relay as its argument,
 * and only the two handlers of a read are bound, once per stream (closures over the state
 * made about 6 functions and 2 scopes more per stream; ARCHITECTURE.md §7 "Relay as one
 * object"). `pull` is not an async function, so per chunk there is one promise: the read's
 * `then`.
 */
class StreamRelay {
  private readonly scanner = new SseUsageScanner();
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  private finished = false;
  private clientGone = false;
  private stalled = false;
  /**
   * Only time spent waiting on the upstream counts towards a stall: while a slow client
   * holds the stream back (no pull, so no read) the upstream is not stalled, and cutting it
   * would lose the usage.
   */
  private waitingOnUpstream = false;
  /** One timer for the whole stream, pushed back on every read (no per-chunk timer). */
  private readonly stallTimer: ReturnType<typeof setTimeout>;
  /** `onRead` and `onReadFailed` bound to this relay once, for every read's `then`. */
  private readonly relayRead: (result: UpstreamRead) => void | Promise<void>;
  private readonly readFailed: (err: unknown) => void;

  /** RelayOptions.identify until the id is known. */
  private identify: ((generationId: string) => Promise<void>) | undefined;

  constructor(
    private readonly reader: UpstreamReader,
    private readonly upstreamAbort: AbortController,
    private readonly options: RelayOptions,
    private readonly onDone: RelayDone,
  ) {
    this.identify = options.identify;
    this.stallTimer = setTimeout(checkStall, options.stallTimeoutMs, this);
    this.relayRead = this.onRead.bind(this);
    this.readFailed = this.onReadFailed.bind(this);
  }

  start(controller: ReadableStreamDefaultController<Uint8Array>): void {
    this.controller = controller;
  }

  pull(): Promise<void> {
    this.waitingOnUpstream = true;
    this.stallTimer.refresh();
    return this.reader.read().then(this.relayRead, this.readFailed);
  }

  cancel(): void {
    this.clientGone = true;
    if (!this.finished) void this.drainAfterClientLeft();
  }

  /** The stall timer fired: cut the upstream if it is what we are waiting on, else look again later. */
  stallTimerFired(): void {
    if (!this.waitingOnUpstream) {
      this.stallTimer.refresh();
      return;
    }
    this.stalled = true;
    this.giveUp("upstream stalled");
  }

  private onRead({ value, done }: UpstreamRead): void | Promise<void> {
    this.waitingOnUpstream = false;
    try {
      if (this.clientGone) {
        if (value) this.see(value);
        return;
      }
      if (this.stalled) throw new Error("the upstream stalled");
      if (done) {
        this.finish("ok");
        this.controller.close();
        return;
      }
      this.see(value);
      const identify = this.identify;
      if (identify !== undefined && this.scanner.generationId !== null) {
        this.identify = undefined;
        // The id first (a failure to record it only costs precision: the call is then
        // charged its reservation if its usage is never seen), then the chunk.
        return identify(this.scanner.generationId).then(
          () => this.relay(value),
          () => this.relay(value),
        );
      }
      this.controller.enqueue(value);
    } catch (err) {
      this.onReadFailed(err);
    }
  }

  private relay(chunk: Uint8Array): void {
    if (this.clientGone || this.finished) return;
    try {
      this.controller.enqueue(chunk);
    } catch (err) {
      this.onReadFailed(err);
    }
  }

  private onReadFailed(err: unknown): void {
    this.waitingOnUpstream = false;
    if (this.clientGone) return;
    this.finish(this.stalled ? "upstream_stalled" : "upstream_reset");
    this.controller.error(err);
  }

  private see(chunk: Uint8Array): void {
    this.scanner.feed(chunk);
    this.options.onChunk?.(chunk);
  }

  private async drainAfterClientLeft(): Promise<void> {
    clearTimeout(this.stallTimer);
    const deadline = setTimeout(() => this.giveUp("drain time over"), this.options.drainTimeoutMs);
    try {
      for (;;) {
        const { value, done } = await this.reader.read();
        if (done) break;
        this.see(value);
      }
    } catch {
      // The upstream ended badly: meter what we saw.
    } finally {
      clearTimeout(deadline);
      this.finish("client_disconnected");
    }
  }

  /**
   * Stop reading for good: abort the fetch and cancel the reader, so that a pending read
   * settles even if the body's source ignores the abort signal.
   */
  private giveUp(reason: string): void {
    this.upstreamAbort.abort(new Error(reason));
    this.reader.cancel(reason).catch(() => {});
  }

  private finish(status: RelayStatus): void {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.stallTimer);
    this.scanner.end();
    this.onDone(status === "ok" && this.scanner.error ? "upstream_error_mid_stream" : status, this.scanner);
  }
}

function checkStall(relay: StreamRelay): void {
  relay.stallTimerFired();
}
