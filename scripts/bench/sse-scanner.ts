/**
 * The usage scanner on its own: CPU per stream for the bench's SSE answer (role chunk, 20
 * content chunks, finish chunk, usage chunk, [DONE]; one chunk per event, as the lean
 * upstream writes them). To compare a change, run it in a `git worktree` of each commit,
 * in turns.
 *
 *   taskset -c 1 bun scripts/bench/sse-scanner.ts [--streams 20000] [--rounds 3]
 */
import { SseUsageScanner } from "../../src/upstream/sse-usage-scanner";
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

const perStream: number[] = [];
for (let round = 0; round < rounds; round++) {
  const start = process.cpuUsage();
  for (let i = 0; i < streams; i++) {
    const scanner = new SseUsageScanner();
    for (const chunk of chunks) scanner.feed(chunk);
    scanner.end();
    if (!scanner.usage) throw new Error("the scanner found no usage");
  }
  const used = process.cpuUsage(start);
  perStream.push((used.user + used.system) / streams);
}
const median = [...perStream].sort((a, b) => a - b)[Math.floor(perStream.length / 2)]!;
console.log(
  `| scanner, ${chunks.length} events per stream, ${streams.toLocaleString("en-US")} streams × ${rounds} rounds | CPU µs per stream (median) | all rounds |`,
);
console.log("| --- | ---: | --- |");
console.log(`| src/upstream/sse-usage-scanner.ts | ${median.toFixed(1)} | ${perStream.map((v) => v.toFixed(1)).join(", ")} |`);
