import { SseUsageScanner } from "../metering/sse-usage-scanner";

export type RelayStatus = "ok" | "upstream_error_mid_stream" | "client_disconnected" | "upstream_stalled" | "upstream_reset";

export interface RelayOptions {
  /** Longest silence (not even a keep-alive comment) tolerated from the upstream. */
  stallTimeoutMs: number;
  /** After the client left, how long to keep reading for the usage chunk. */
  drainTimeoutMs: number;
  /** Sees every upstream chunk, relayed or drained (the idempotency recorder keeps them). */
  onChunk?: (chunk: Uint8Array) => void;
}

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
  onDone: (status: RelayStatus, scanner: SseUsageScanner) => void,
): ReadableStream<Uint8Array> {
  const reader = upstreamBody.getReader();
  const scanner = new SseUsageScanner();
  let finished = false;
  let clientGone = false;
  let stalled = false;

  // Stop reading for good: abort the fetch and cancel the reader, so that a pending read
  // settles even if the body's source ignores the abort signal.
  const giveUp = (reason: string) => {
    upstreamAbort.abort(new Error(reason));
    reader.cancel(reason).catch(() => {});
  };

  // One timer for the whole stream, pushed back on every read (no per-chunk promise). Only
  // time spent waiting on the upstream counts: while a slow client holds the stream back
  // (no pull, so no read) the upstream is not stalled, and cutting it would lose the usage.
  let waitingOnUpstream = false;
  const stallTimer = setTimeout(() => {
    if (!waitingOnUpstream) {
      stallTimer.refresh();
      return;
    }
    stalled = true;
    giveUp("upstream stalled");
  }, options.stallTimeoutMs);

  const finish = (status: RelayStatus) => {
    if (finished) return;
    finished = true;
    clearTimeout(stallTimer);
    scanner.end();
    onDone(status === "ok" && scanner.error ? "upstream_error_mid_stream" : status, scanner);
  };

  const drainAfterClientLeft = async () => {
    clearTimeout(stallTimer);
    const deadline = setTimeout(() => giveUp("drain time over"), options.drainTimeoutMs);
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        scanner.feed(value);
        options.onChunk?.(value);
      }
    } catch {
      // The upstream ended badly: meter what we saw.
    } finally {
      clearTimeout(deadline);
      finish("client_disconnected");
    }
  };

  // The read's handlers are made once per stream and `pull` is not an async function: per
  // chunk that leaves one promise (the read's `then`), where an async `pull` made several
  // more objects, which 2,000 open streams kept for the collector (BENCHMARKS.md, issue 14).
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const failed = (err: unknown) => {
    waitingOnUpstream = false;
    if (clientGone) return;
    finish(stalled ? "upstream_stalled" : "upstream_reset");
    controller.error(err);
  };
  const relayRead = ({ value, done }: Awaited<ReturnType<typeof reader.read>>) => {
    waitingOnUpstream = false;
    try {
      if (clientGone) {
        if (value) {
          scanner.feed(value);
          options.onChunk?.(value);
        }
        return;
      }
      if (stalled) throw new Error("the upstream stalled");
      if (done) {
        finish("ok");
        controller.close();
        return;
      }
      scanner.feed(value);
      options.onChunk?.(value);
      controller.enqueue(value);
    } catch (err) {
      failed(err);
    }
  };

  return new ReadableStream<Uint8Array>(
    {
      start(streamController) {
        controller = streamController;
      },
      pull() {
        waitingOnUpstream = true;
        stallTimer.refresh();
        return reader.read().then(relayRead, failed);
      },
      cancel() {
        clientGone = true;
        if (!finished) void drainAfterClientLeft();
      },
    },
    { highWaterMark: 0 },
  );
}
