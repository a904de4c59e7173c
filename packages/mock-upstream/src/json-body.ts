/**
 * `reset_mid_stream` and `stall_mid_stream` for a JSON (non-streamed) completion: the
 * headers and the first half of the body go out, then the connection is cut, or nothing
 * more comes until the reader gives up. What a proxy sees when an upstream dies while
 * writing a large JSON answer.
 */
import { Gate } from "./gate";

export interface PartialJsonHooks {
  /** Called once, when the reader went away (cancel or request abort). */
  onAbort(): void;
  /** See StreamHooks.overSocket: over a socket an `undefined` error is a silent cut. */
  overSocket: boolean;
}

export function partialJsonBody(json: string, mode: "reset" | "stall", signal: AbortSignal, hooks: PartialJsonHooks): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(json);
  const half = bytes.subarray(0, Math.floor(bytes.length / 2));
  const gate = new Gate();
  let sent = false;
  let ended = false;
  let controller!: ReadableStreamDefaultController<Uint8Array>;

  const abort = () => {
    if (ended) return;
    ended = true;
    gate.close();
    hooks.onAbort();
  };
  const onAbort = () => {
    abort();
    controller.error(hooks.overSocket ? undefined : signal.reason);
  };

  return new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    },
    async pull(c) {
      if (!sent) {
        sent = true;
        c.enqueue(half);
        return;
      }
      if (mode === "stall") {
        await gate.forever();
        return;
      }
      // Let the half reach the socket before the cut (as sse-stream.ts does for streams).
      await gate.sleep(10);
      if (ended) return;
      ended = true;
      signal.removeEventListener("abort", onAbort);
      c.error(
        hooks.overSocket ? undefined : Object.assign(new TypeError("mock upstream: connection reset mid-body (reset_mid_stream)"), { code: "ECONNRESET" }),
      );
    },
    cancel() {
      abort();
    },
  });
}
