/**
 * The service's own per-request cost without any socket: `app.handle(new Request(…))`
 * with a canned upstream answer in memory (the bytes the mock answers to the bench
 * bodies), 64 requests in flight, on one pinned core. Each variant builds a fresh app and
 * takes one piece out, so the differences price the pieces; the first rows are the floor
 * (a plain function and a one-route Elysia app doing the same forwarding).
 *
 *   taskset -c 1 bun scripts/bench/in-process.ts [--requests 50000] [--shape json|sse]
 *     [--repeat 3] [--only TEXT]
 *
 * Each variant runs in its own child process (pinned like the parent), --repeat rounds;
 * prints a Markdown table of median CPU microseconds per request. --only runs one variant
 * in this process (e.g. under --cpu-prof) and prints its numbers as JSON.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Elysia } from "elysia";
import { createApp } from "../../src/app";
import { openDeps, type DepsOverrides } from "../../src/deps";
import { loadConfig } from "../../src/config";
import { memoryLogger } from "../../src/logger";
import { UsageWriter } from "../../src/metering/usage-writer";
import { createMockUpstream } from "../../packages/mock-upstream/src";
import { ChatCompletionRequest } from "../../src/routes/chat";
import type { UsageLedgerRepository } from "../../src/store/usage-ledger";
import type { RateLimiter } from "../../src/ratelimit/rate-limiter";
import { createAppWithKey } from "../../src/services/operator/secret-keys";
import { BODIES } from "./workload";

const args = process.argv.slice(2);
const opt = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : args[i + 1]!;
};
const total = Number(opt("requests", "50000"));
const shape = opt("shape", "json") as "json" | "sse";
/** Run only the rows whose label contains this (e.g. to profile one with --cpu-prof). */
const only = opt("only", "");
const wanted = (label: string) => only === "" || label.includes(only);
const body = BODIES[shape];
const BODY_LENGTH = String(Buffer.byteLength(body));
const URL_ = "http://localhost/api/v1/chat/completions";

// The mock's answer, captured once; replayed from memory for every call.
const mock = createMockUpstream({ recordServed: false });
const captured = await mock.fetch(new Request(URL_, { method: "POST", headers: { authorization: "Bearer x" }, body }));
const answerHeaders = Object.fromEntries(captured.headers);
const answer = new Uint8Array(await captured.arrayBuffer());
const events =
  shape === "sse"
    ? new TextDecoder()
        .decode(answer)
        .split(/(?<=\n\n)/)
        .map((e) => new TextEncoder().encode(e))
    : [];
const modelsBody = await (await mock.fetch(new Request("http://localhost/api/v1/models"))).text();

function cannedUpstream(url: string): Promise<Response> {
  if (url.endsWith("/models")) return Promise.resolve(new Response(modelsBody, { headers: { "content-type": "application/json" } }));
  if (shape === "json") return Promise.resolve(new Response(answer, { headers: answerHeaders }));
  let i = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      c.enqueue(events[i++]!);
      if (i >= events.length) c.close();
    },
  });
  return Promise.resolve(new Response(stream, { headers: answerHeaders }));
}

type Handle = (request: Request) => Promise<Response>;

async function measure(handle: Handle, headers: Record<string, string>): Promise<{ usPerRequest: number; cpuUsPerRequest: number }> {
  const one = async () => {
    // With its Content-Length, as every client over the network sends it: without one the
    // service reads the body through its bounded reader (body-limit.ts), which no bench client causes.
    const response = await handle(
      new Request(URL_, { method: "POST", headers: { "content-type": "application/json", "content-length": BODY_LENGTH, ...headers }, body }),
    );
    if (response.status !== 200) throw new Error(`status ${response.status}: ${await response.text()}`);
    await response.arrayBuffer();
  };
  const run = async (n: number) => {
    let next = 0;
    const worker = async () => {
      while (next++ < n) await one();
    };
    await Promise.all(Array.from({ length: 64 }, worker));
  };
  await run(Math.min(5000, total / 5)); // warm-up: JIT, caches
  Bun.gc(true);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await run(total);
  const wall = (performance.now() - t0) * 1000;
  const cpu = process.cpuUsage(cpu0);
  return { usPerRequest: wall / total, cpuUsPerRequest: (cpu.user + cpu.system) / total };
}

const dir = mkdtempSync(join(tmpdir(), "bench-in-process-"));
const rows: Array<{ label: string; usPerRequest: number; cpuUsPerRequest: number }> = [];

async function service(label: string, opts: { memoryDb?: boolean; noWriter?: boolean; noRateLimit?: boolean }) {
  if (!wanted(label)) return;
  const config = loadConfig({
    UPSTREAM_API_KEY: "sk-or-bench",
    UPSTREAM_BASE_URL: "http://upstream.invalid/api/v1",
    RL_CHAT_LIMIT: "1000000000",
    MAX_MONTHLY_USD: "1000000",
    DATABASE_URL: opts.memoryDb ? "sqlite::memory:" : `sqlite:${join(dir, `${rows.length}.sqlite`)}`,
  });
  const logger = memoryLogger();
  const overrides: DepsOverrides = { logger, fetchUpstream: (url) => cannedUpstream(url) };
  if (opts.noWriter)
    overrides.usageWriter = new UsageWriter({ insertBatch: async (r: unknown[]) => r.length } as unknown as UsageLedgerRepository, logger, 100);
  if (opts.noRateLimit)
    overrides.rateLimiter = {
      kind: "none",
      check: async (rule) => ({ allowed: true, limit: rule.limit, remaining: rule.limit, resetMs: 1 }),
    } satisfies RateLimiter;
  // openDeps opens the store as the server does (with its read cache) and reads (or
  // creates) the stored session secret.
  const deps = await openDeps(config, overrides);
  const { app: created, key } = await createAppWithKey(deps.store.apps, "bench", [], Date.now());
  await deps.store.connections.approve(created.id, "bench-user", 1e15, Date.now());
  await deps.catalogue.refresh();
  const app = createApp(deps);
  const r = await measure((req) => app.handle(req), { authorization: `Bearer ${key.secretKey}`, "x-service-user": "bench-user" });
  await deps.usageWriter.close();
  rows.push({ label, ...r });
  await deps.store.close();
}

const VARIANTS: Array<{ label: string; service?: Parameters<typeof service>[1] }> = [
  { label: "(b) in-process: a plain function parses the body, calls the upstream, returns its body" },
  { label: "one Elysia route with the chat body schema, same forwarding" },
  { label: "this service, SQLite file (as deployed)", service: {} },
  { label: "this service, SQLite in memory (no file locks, no WAL writes)", service: { memoryDb: true } },
  { label: "this service, ledger rows discarded", service: { noWriter: true } },
  { label: "this service, allow-all rate limiter", service: { noRateLimit: true } },
  { label: "this service, both taken out", service: { noWriter: true, noRateLimit: true } },
];

// Floors: the same forwarding with nothing else, as a plain function and as an Elysia route.
const forwardParsed = async (parsed: unknown) => {
  const upstream = await cannedUpstream(JSON.stringify(parsed) && URL_);
  return new Response(upstream.body, { headers: { "content-type": upstream.headers.get("content-type") ?? "application/json" } });
};

async function runVariant(v: (typeof VARIANTS)[number]): Promise<void> {
  if (v.service) return service(v.label, v.service);
  if (v.label.startsWith("(b)")) {
    rows.push({ label: v.label, ...(await measure(async (r) => forwardParsed(await r.json()), {})) });
    return;
  }
  const elysia = new Elysia().post("/api/v1/chat/completions", ({ body }) => forwardParsed(body), { body: ChatCompletionRequest });
  rows.push({ label: v.label, ...(await measure((r) => elysia.handle(r), {})) });
}

if (only !== "") {
  // One variant in this process: print its numbers as one JSON line.
  try {
    for (const v of VARIANTS) if (wanted(v.label)) await runVariant(v);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  for (const r of rows) console.log(JSON.stringify(r));
  process.exit(0);
}

// Every variant in its own process (no heap or JIT state carried over), `repeat` rounds
// taken in turn so that drift on the machine spreads over all of them; the median is kept.
rmSync(dir, { recursive: true, force: true });
const repeat = Number(opt("repeat", "3"));
const samples = new Map<string, number[]>();
for (let round = 0; round < repeat; round++) {
  for (const v of VARIANTS) {
    const proc = Bun.spawn([process.execPath, import.meta.path, "--only", v.label, "--requests", String(total), "--shape", shape], {
      stdout: "pipe",
      stderr: "inherit",
    });
    const out = await new Response(proc.stdout).text();
    await proc.exited;
    const line = out.split("\n").find((l) => l.startsWith("{"));
    if (!line) throw new Error(`variant ${v.label} printed nothing`);
    const r = JSON.parse(line) as { cpuUsPerRequest: number };
    samples.set(v.label, [...(samples.get(v.label) ?? []), r.cpuUsPerRequest]);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const base = median(samples.get(VARIANTS[0]!.label)!);
console.log(
  `\n| in-process, ${shape.toUpperCase()}, ${total.toLocaleString("en-US")} requests, 64 in flight | CPU µs/request, median of ${repeat} (ratio to (b) in-process) | all runs |`,
);
console.log("| --- | ---: | --- |");
for (const v of VARIANTS) {
  const xs = samples.get(v.label)!;
  console.log(`| ${v.label} | ${median(xs).toFixed(1)} (${(median(xs) / base).toFixed(2)}×) | ${xs.map((x) => x.toFixed(1)).join(", ")} |`);
}
process.exit(0);
