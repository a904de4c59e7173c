/**
 * One request at a time, timed one by one: the latency a proxy adds when nothing queues.
 *
 *   bun scripts/bench/sequential.ts --url URL --body-file F --headers '{"k":"v"}' \
 *     [--count 2000] [--warmup 200] [--seconds 60]
 *
 * Per request: time to the response headers, to the first body chunk (for a stream: the
 * first SSE event, which is what a user waits for) and to the end of the body. Every
 * response must be 200 and, for a stream, end with `data: [DONE]`. Prints one JSON line of
 * percentiles in microseconds. Bounded by --count and by --seconds, whichever comes first.
 */
import { flagReader } from "./lib/flags";

const flag = flagReader();

const url = flag("url");
const body = await Bun.file(flag("body-file")).text();
const headers = { "content-type": "application/json", ...(JSON.parse(flag("headers", "{}")) as Record<string, string>) };
const count = Number(flag("count", "2000"));
const warmup = Number(flag("warmup", "200"));
const deadline = performance.now() + Number(flag("seconds", "60")) * 1000;
const stream = body.includes('"stream":true');

interface Sample {
  /** When the request was sent (performance.now(), ms); --samples-out writes it relative to the first timed one. */
  at: number;
  headers: number;
  first: number;
  total: number;
}

async function once(): Promise<Sample> {
  const t0 = performance.now();
  const response = await fetch(url, { method: "POST", headers, body });
  const tHeaders = performance.now();
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}: ${await response.text()}`);
  const reader = response.body!.getReader();
  let tFirst = 0;
  let tail = "";
  const decoder = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    if (tFirst === 0) tFirst = performance.now();
    if (stream) tail = (tail + decoder.decode(value, { stream: true })).slice(-64);
  }
  const tEnd = performance.now();
  if (stream && !tail.endsWith("data: [DONE]\n\n")) throw new Error(`a stream from ${url} did not end with [DONE]: …${tail}`);
  return { at: t0, headers: (tHeaders - t0) * 1000, first: ((tFirst || tEnd) - t0) * 1000, total: (tEnd - t0) * 1000 };
}

for (let i = 0; i < warmup && performance.now() < deadline; i++) await once();
const samples: Sample[] = [];
for (let i = 0; i < count && performance.now() < deadline; i++) samples.push(await once());

function summary(values: number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  const mean = sorted.reduce((a, b) => a + b, 0) / sorted.length;
  const round = (x: number) => Math.round(x * 10) / 10;
  return { p50: round(at(0.5)), p90: round(at(0.9)), p99: round(at(0.99)), max: round(sorted[sorted.length - 1]!), mean: round(mean) };
}

// Every sample, for finding what the slow ones have in common (their spacing, say). Its
// wall-clock start (`epochMs`) lines it up with a `perf record -k CLOCK_REALTIME` of the
// service's core: which threads ran during a slow call.
const samplesOut = flag("samples-out", "");
if (samplesOut) {
  const start = samples[0]?.at ?? 0;
  await Bun.write(samplesOut, samples.map((s) => JSON.stringify({ ...s, at: s.at - start, epochMs: performance.timeOrigin + s.at })).join("\n") + "\n");
}

console.log(
  JSON.stringify({
    requests: samples.length,
    stream,
    headersUs: summary(samples.map((s) => s.headers)),
    firstByteUs: summary(samples.map((s) => s.first)),
    totalUs: summary(samples.map((s) => s.total)),
  }),
);
