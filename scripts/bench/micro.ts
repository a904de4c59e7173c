/**
 * Nanosecond-scale costs that choices in src/ rest on (ARCHITECTURE.md §7): the secret hash
 * (src/auth/secret-key.ts) and what the SSE scanner's byte helpers avoid or use
 * (src/upstream/sse-bytes.ts), on a content chunk as the bench's upstream sends it.
 *
 *   taskset -c 1 bun scripts/bench/micro.ts [--calls 1000000]
 *
 * Each is timed over --calls calls after a warm-up; prints a Markdown table.
 */
import { createHash } from "node:crypto";
import { flagReader } from "./lib/flags";

const flag = flagReader();
const calls = Number(flag("calls", "1000000"));
let sink = 0;

/** Nanoseconds per call of `f`. */
function nsPerCall(f: () => number): number {
  for (let i = 0; i < 10_000; i++) sink += f();
  const start = performance.now();
  for (let i = 0; i < calls; i++) sink += f();
  return ((performance.now() - start) * 1e6) / calls;
}

const secret = "0123456789abcdefghijklmnopqrstuv";
const content = { id: "gen-1", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: "word word word " }, finish_reason: null }] };
const chunk = new TextEncoder().encode(`data: ${JSON.stringify(content)}\n\n`);
const usageKey = Buffer.from('"usage"');
const decoder = new TextDecoder();

const rows: Array<[string, () => number]> = [
  ["SHA-256 of a secret, Bun.SHA256.hash", () => Bun.SHA256.hash(secret).length],
  ["SHA-256 of a secret, node:crypto createHash", () => createHash("sha256").update(secret).digest().length],
  [`a Buffer view of a ${chunk.length}-byte chunk`, () => Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length).length],
  ["a subarray of it", () => chunk.subarray(1).length],
  ["its line end, Uint8Array indexOf", () => chunk.indexOf(10)],
  ['a key ("usage"), Buffer.prototype.indexOf on the chunk', () => Buffer.prototype.indexOf.call(chunk, usageKey)],
  ["decoding it, TextDecoder", () => decoder.decode(chunk).length],
];
console.log(`| ${calls.toLocaleString("en-US")} calls each | ns per call |`);
console.log("| --- | ---: |");
for (const [label, f] of rows) console.log(`| ${label} | ${nsPerCall(f).toFixed(0)} |`);
if (sink === 0) console.log("(nothing measured)");
