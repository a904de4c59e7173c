/**
 * The `split_frames` scenario: re-cuts the SSE byte stream so that writes end at awkward
 * places, as TCP and proxies are free to do: inside the `data:` field name, inside a
 * multi-byte UTF-8 character, and between the two line ends that close an event (so an
 * event's dispatch arrives with the next write, and in `crlf` mode a CR is parted from its LF).
 * Deterministic, so a failure reproduces.
 */
export class FrameSplitter {
  private carry: Uint8Array = new Uint8Array(0);

  /** Takes one whole frame; returns the writes to make now (the frame's tail waits). */
  push(frame: Uint8Array): Uint8Array[] {
    const start = this.carry.length;
    const buf = new Uint8Array(start + frame.length);
    buf.set(this.carry, 0);
    buf.set(frame, start);

    const cuts = [start + 3, start + frame.length - 1];
    const multiByte = frame.findIndex((b) => b >= 0xc0);
    if (multiByte !== -1) cuts.push(start + multiByte + 1);
    cuts.sort((a, b) => a - b);

    const writes: Uint8Array[] = [];
    let from = 0;
    for (const cut of cuts) {
      if (cut <= from || cut >= buf.length) continue;
      writes.push(buf.subarray(from, cut));
      from = cut;
    }
    this.carry = buf.subarray(from);
    // Every push must yield a write, or a reader waiting on the stream would starve.
    if (writes.length === 0) {
      writes.push(this.carry);
      this.carry = new Uint8Array(0);
    }
    return writes;
  }

  /** What is still held back, to write before the stream ends. */
  flush(): Uint8Array | null {
    const rest = this.carry;
    this.carry = new Uint8Array(0);
    return rest.length > 0 ? rest : null;
  }
}
