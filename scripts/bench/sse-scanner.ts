/**
 * The usage scanner on its own: CPU per stream for the bench's SSE answer (role chunk, 20
 * content chunks, finish chunk, usage chunk, [DONE]; one chunk per event, as the lean
 * upstream writes them), the service's scanner (bytes, by position) against the two
 * variants in scripts/bench/variants/ (the previous one, which decoded each chunk, and one
 * on Buffer views), interleaved in one process.
 *
 *   taskset -c 1 bun scripts/bench/sse-scanner.ts [--streams 20000] [--rounds 3]
 */
import { SseUsageScanner } from "../../src/upstream/sse-usage-scanner";
import { SseUsageScanner as BufferViewScanner } from "./variants/sse-usage-scanner-bytes";
import { SseUsageScanner as DecodingScanner } from "./variants/sse-usage-scanner-decoding";
import { flagReader } from "./lib/flags";

const flag = flagReader();
const streams = Number(flag("streams", "20000"));
const rounds = Number(flag("rounds", "3"));

const encoder = new TextEncoder();
const event = (chunk: object) =>
  encoder.encode(`data: ${JSON.stringify({ id: "gen-bench", object: "chat.completion.chunk", created: 1, model: "openai/gpt-4o-mini", ...chunk })}\n\n`);
const chunks = [
  event({ choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] }),
  ...Array.from({ length: 20 }, (_, i) => event({ choices: [{ index: 0, delta: { content: `word${i} ` }, finish_reason: null }] })),
  event({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }),
  event({ choices: [], usage: { prompt_tokens: 12, completion_tokens: 20, total_tokens: 32, cost: 0.0000321 } }),
  encoder.encode("data: [DONE]\n\n"),
];

const scanners: Array<[string, new () => { feed(chunk: Uint8Array): void; end(): void; usage: unknown }]> = [
  ["src/upstream/sse-usage-scanner.ts (bytes, by position)", SseUsageScanner],
  ["variants/sse-usage-scanner-decoding.ts (decodes each chunk)", DecodingScanner],
  ["variants/sse-usage-scanner-bytes.ts (Buffer views)", BufferViewScanner],
];
const results = new Map<string, number[]>(scanners.map(([name]) => [name, []]));
for (let round = 0; round < rounds; round++) {
  for (const [name, Scanner] of scanners) {
    const start = process.cpuUsage();
    for (let i = 0; i < streams; i++) {
      const scanner = new Scanner();
      for (const chunk of chunks) scanner.feed(chunk);
      scanner.end();
      if (!scanner.usage) throw new Error(`${name} found no usage`);
    }
    const used = process.cpuUsage(start);
    results.get(name)!.push((used.user + used.system) / streams);
  }
}
console.log(
  `| scanner, ${chunks.length} events per stream, ${streams.toLocaleString("en-US")} streams × ${rounds} rounds | CPU µs per stream (median) | all rounds |`,
);
console.log("| --- | ---: | --- |");
for (const [name, values] of results) {
  const median = [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  console.log(`| ${name} | ${median.toFixed(1)} | ${values.map((v) => v.toFixed(1)).join(", ")} |`);
}
