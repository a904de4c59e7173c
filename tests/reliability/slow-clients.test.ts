/**
 * Slow clients: 100 HTTP clients that read 1 byte per second from large streamed
 * completions (Node sockets that truly stop reading, scripts/bench/lib/slow-readers.mjs)
 * must not grow the proxy by more than a few MB each, must not be buffered by the proxy
 * (the mock's served log shows their upstream deliveries held back), must not stop healthy
 * clients from being served correctly, and still leave a ledger row each once they go.
 *
 * No timing thresholds: healthy calls are checked for content and rows, not speed (the
 * latency ratio is measured by scripts/bench/slow-clients.ts); memory is a bound in MB.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { checkChatStream } from "../helpers/openrouter-spec";
import { nano, startProxyStack, type ProxyStack } from "../helpers/proxy-stack";
import { completionText } from "../../packages/mock-upstream/src";
import { startSlowReaders, type SlowReaders } from "../../scripts/bench/lib/slow-readers";
import { call, chatBody, rowOf, rssMb } from "./fault-client";

setDefaultTimeout(120_000);

const SLOW_CLIENTS = 100;
/**
 * 64 MB of SSE per slow stream (2,000 content chunks padded to 32 KiB each): far more than
 * the kernel's socket buffers on both legs hold. (Loopback sockets here autotune to several
 * MB each: a 3.7 MB stream of 16,000 plain chunks fitted in them whole, measured.)
 */
const SLOW_TOKENS = 16_000;
const SLOW_DIRECTIVE = `[[mock tokens=${SLOW_TOKENS} chunks=2000 pad_lines=32768]]`;
/** How long the slow clients stay attached while the healthy ones are served. */
const ATTACHED_MS = 15_000;
/**
 * "A few MB" per slow client, as the issue puts it. Measured: ~2.6 MB each (Bun's fetch reads
 * some of the upstream body ahead of the relay's pulls); 4 MB leaves room for noise.
 */
const MAX_GROWTH_PER_CLIENT_MB = 4;

let stack: ProxyStack;
let slow: SlowReaders | null = null;

beforeAll(async () => {
  stack = await startProxyStack({
    // The upstream timeout is below ATTACHED_MS: a stream held back by its client is not a stalled
    // upstream. 10 s, not 5: in a full-suite run on a loaded machine the mock (in this test's own
    // process, pumping 100 slow streams) once took over 5 s to answer a healthy call's headers.
    env: { RL_CHAT_LIMIT: "100000", DISCONNECT_DRAIN_MS: "5000", UPSTREAM_TIMEOUT_MS: "10000" },
  });
  await Promise.all([stack.connect("slow", 50), stack.connect("healthy", 50)]);
});

afterAll(async () => {
  slow?.kill();
  await stack?.stop();
});

test(`${SLOW_CLIENTS} clients reading 1 byte/s: bounded memory, no buffering, healthy clients served, every call metered`, async () => {
  const pid = stack.server.proc.pid;
  // Warm up the paths the test uses, so the baseline includes JIT and allocator growth.
  for (let i = 0; i < 5; i++) {
    await call(stack, "healthy", "[[mock tokens=200]]", true);
    await call(stack, "healthy", "[[mock tokens=20]]", false);
  }
  const healthyRowsBefore = (await stack.waitForUsage("healthy", 10)).length;
  const before = rssMb(pid);
  const servedFrom = stack.mock.served.length;

  slow = startSlowReaders({
    port: stack.server.port,
    path: "/api/v1/chat/completions",
    headers: { authorization: `Bearer ${stack.secretKey}`, "content-type": "application/json", "x-service-user": "slow" },
    // max_tokens explicit: without it the proxy reserves and sends DEFAULT_MAX_TOKENS (4096).
    body: JSON.stringify(chatBody(SLOW_DIRECTIVE, true, { max_tokens: SLOW_TOKENS })),
    count: SLOW_CLIENTS,
    bytesPerTick: 1,
    tickMs: 1000,
  });
  await slow.ready;
  const attachedAt = Date.now();

  // Healthy clients, meanwhile: sequential JSON and streamed calls, checked to the byte.
  let healthy = 0;
  while (Date.now() - attachedAt < ATTACHED_MS) {
    const json = await call(stack, "healthy", "[[mock tokens=20]]", false);
    expect(json.status).toBe(200);
    expect(JSON.parse(new TextDecoder().decode(json.bytes)).choices[0].message.content).toBe(completionText(20));
    const streamed = await call(stack, "healthy", "[[mock tokens=200]]", true);
    expect(streamed.status).toBe(200);
    expect(streamed.cut).toBeNull();
    const checked = checkChatStream(new TextDecoder().decode(streamed.bytes));
    expect(checked.problems).toEqual([]);
    expect(checked.done).toBe(true);
    expect(checked.chunks.map((c: any) => c.choices[0]?.delta?.content ?? "").join("")).toBe(completionText(200));
    const row = await rowOf(stack, "healthy", streamed.requestId);
    expect(row).toMatchObject({ status: "ok", source: "upstream", completionTokens: 200 });
    healthy += 2;
  }
  expect(healthy).toBeGreaterThan(0);

  // All slow streams reached the upstream, and the proxy read only what the kernels' buffers took.
  const slowServed = stack.servedSince(servedFrom).filter((s) => s.completionTokens === SLOW_TOKENS);
  expect(slowServed).toHaveLength(SLOW_CLIENTS);
  const delivered = slowServed.map((s) => s.deliveredTokens).sort((a, b) => a - b);
  const during = rssMb(pid);
  const growth = during - before;
  console.log(
    `[slow clients] proxy RSS ${before.toFixed(1)} MB before, ${during.toFixed(1)} MB with ${SLOW_CLIENTS} slow clients attached ` +
      `(growth ${growth.toFixed(1)} MB, ${((growth * 1024) / SLOW_CLIENTS).toFixed(0)} KB per client); ` +
      `upstream tokens delivered per slow stream: min ${delivered[0]}, median ${delivered[SLOW_CLIENTS >> 1]}, max ${delivered.at(-1)} of ${SLOW_TOKENS}; ` +
      `${healthy} healthy calls served meanwhile`,
  );
  expect(growth).toBeLessThan(MAX_GROWTH_PER_CLIENT_MB * SLOW_CLIENTS);
  // Held back: had the proxy buffered, every upstream would have sent its whole completion.
  // And not given up on: a stream waiting for its client is not a stalled upstream, even
  // when the client holds it back for longer than UPSTREAM_TIMEOUT_MS.
  // How much one stream gets ahead depends on kernel socket buffers (one run saw 8,232 of
  // 16,000 tokens), so the bound is on the typical stream, and every one must be unfinished.
  for (const s of slowServed) {
    expect(s.completed).toBe(false);
    expect(s.aborted).toBe(false);
  }
  expect(delivered[SLOW_CLIENTS >> 1]!).toBeLessThan(SLOW_TOKENS / 2);
  expect((await stack.usage("slow")).length).toBe(0);

  const stats = await slow.close();
  slow = null;
  expect(stats).toHaveLength(SLOW_CLIENTS);
  for (const s of stats) {
    // 1 byte a second: the status line is what they had time for.
    expect(s.error).toBeNull();
    expect(s.bytes).toBeGreaterThan(0);
    expect("HTTP/1.1 200 OK".startsWith(s.head.slice(0, 15))).toBe(true);
  }

  // Each slow call leaves one row once its client is gone, at what the upstream billed: the
  // usage read while draining, or the upstream's record of the generation, never $0.
  const rows = await stack.waitForUsage("slow", SLOW_CLIENTS);
  expect(rows).toHaveLength(SLOW_CLIENTS);
  const byGeneration = new Map(slowServed.map((s) => [s.id, s]));
  for (const row of rows) {
    expect(row.status).toBe("client_disconnected");
    expect(row.costUsd).toBeGreaterThan(0);
    expect(["upstream", "generation"]).toContain(row.source);
    expect(nano(row.costUsd)).toBe(nano(byGeneration.get(row.generationId!)!.costUsd));
  }
  const sources: Record<string, number> = {};
  for (const r of rows) sources[r.source] = (sources[r.source] ?? 0) + 1;
  console.log(`[slow clients] rows after close: ${JSON.stringify(sources)}`);
  expect((await stack.usage("healthy")).length).toBe(healthyRowsBefore + healthy);
  expect((await stack.server.fetch("/healthz")).status).toBe(200);
  expect(stack.server.logLines().filter((l) => l.level === "error")).toEqual([]);
});
