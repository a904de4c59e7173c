/**
 * Byte helpers for the SSE usage scanner. They work on plain Uint8Arrays, as read from the
 * upstream, without wrapping them: under Bun 1.4.5 a `Buffer` view of a chunk costs more
 * than the searches themselves, and a `subarray` about as much (ARCHITECTURE.md §7 "SSE byte
 * helpers").
 */

/**
 * Where `needle` next occurs in `bytes` at or after `from`, or -1. Node's byte search
 * (`Buffer.prototype.indexOf`), called on the chunk itself: it accepts any Uint8Array as
 * `this`, so no view is made (about 29 ns on a 284-byte chunk).
 */
export const indexOfBytes = Buffer.prototype.indexOf as (this: Uint8Array, needle: Uint8Array, from: number) => number;

/** Whether `bytes[at, end)` begins with `prefix`. */
export function startsWithAt(bytes: Uint8Array, at: number, end: number, prefix: Uint8Array): boolean {
  if (end - at < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (bytes[at + i] !== prefix[i]) return false;
  return true;
}

/** Whether `bytes[at, end)` is exactly `value`. */
export function equalsAt(bytes: Uint8Array, at: number, end: number, value: Uint8Array): boolean {
  return end - at === value.length && startsWithAt(bytes, at, end, value);
}

/** The pieces one after the other, with `separator` (a byte) between them when given: a fresh copy. */
export function concatBytes(pieces: Uint8Array[], separator?: number): Uint8Array {
  let length = separator === undefined ? 0 : Math.max(0, pieces.length - 1);
  for (const piece of pieces) length += piece.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (let i = 0; i < pieces.length; i++) {
    if (i > 0 && separator !== undefined) out[at++] = separator;
    out.set(pieces[i]!, at);
    at += pieces[i]!.length;
  }
  return out;
}

/** The last `keep` bytes of `held` followed by `more`: a fresh copy. */
export function lastBytes(held: Uint8Array, more: Uint8Array, keep: number): Uint8Array {
  if (more.length >= keep) return more.slice(more.length - keep);
  const fromHeld = Math.min(held.length, keep - more.length);
  return concatBytes([held.subarray(held.length - fromHeld), more]);
}
