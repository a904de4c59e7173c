/**
 * Healthy-client latency with and without slow clients attached: N sequential streamed
 * completions (p50 / p99) through a real proxy process, first alone, then while 100
 * clients read 1 byte per second from 64 MB streams (the same slow readers as
 * tests/reliability/slow-clients.test.ts). Prints both and the ratio.
 *
 *   bun scripts/bench/slow-clients.ts [--requests 300] [--slow 100]
 */
import { startProxyStack } from "../../tests/helpers/proxy-stack";
import { startSlowReaders } from "./lib/slow-readers";
import { flagReader } from "./lib/flags";
import { memoryMb } from "./lib/proc";

const flag = flagReader();
const requests = Number(flag("requests", "300"));
const slowCount = Number(flag("slow", "100"));
// max_tokens explicit: a call without it is sent DEFAULT_MAX_TOKENS (4096), fewer than the slow streams ask for.
const body = (directive: string) =>
  JSON.stringify({ model: "openai/gpt-4o-mini", max_tokens: 16000, messages: [{ role: "user", content: `Hi ${directive}` }], stream: true });

const stack = await startProxyStack({ env: { RL_CHAT_LIMIT: "1000000", DISCONNECT_DRAIN_MS: "1000" } });
try {
  await Promise.all([stack.connect("healthy", 1000), stack.connect("slow", 1000)]);
  const headers = { authorization: `Bearer ${stack.secretKey}`, "content-type": "application/json", "x-service-user": "healthy" };

  /** Wall time of each of `requests` sequential 50-token streams, read to the end. */
  const measure = async (): Promise<number[]> => {
    const times: number[] = [];
    for (let i = 0; i < requests; i++) {
      const t0 = performance.now();
      const res = await fetch(`${stack.baseURL}/chat/completions`, { method: "POST", headers, body: body("[[mock tokens=50]]") });
      const text = await res.text();
      if (res.status !== 200 || !text.includes("[DONE]")) throw new Error(`healthy call failed: ${res.status} ${text.slice(0, 200)}`);
      times.push(performance.now() - t0);
    }
    return times.sort((a, b) => a - b);
  };
  const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

  await measure(); // warm-up
  const alone = await measure();
  const slow = startSlowReaders({
    port: stack.server.port,
    path: "/api/v1/chat/completions",
    headers: { ...headers, "x-service-user": "slow" },
    body: body("[[mock tokens=16000 chunks=2000 pad_lines=32768]]"),
    count: slowCount,
    bytesPerTick: 1,
    tickMs: 1000,
  });
  await slow.ready;
  await Bun.sleep(2000); // let the slow streams fill their socket buffers
  const rssAttached = memoryMb(stack.server.proc.pid).rss;
  const withSlow = await measure();
  await slow.close();

  const row = (label: string, t: number[]) => `| ${label} | ${pct(t, 50).toFixed(2)} | ${pct(t, 99).toFixed(2)} |`;
  console.log(`| ${requests} sequential 50-token streams | p50 (ms) | p99 (ms) |`);
  console.log("| --- | ---: | ---: |");
  console.log(row("no slow clients", alone));
  console.log(row(`${slowCount} slow clients attached (1 byte/s)`, withSlow));
  console.log(
    `ratio with/without: p50 ${(pct(withSlow, 50) / pct(alone, 50)).toFixed(2)}, p99 ${(pct(withSlow, 99) / pct(alone, 99)).toFixed(2)}; proxy RSS with slow clients attached ${rssAttached.toFixed(1)} MB`,
  );
} finally {
  await stack.stop();
}
