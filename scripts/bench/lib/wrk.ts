/**
 * One wrk run (Debian's wrk 4.x) with scripts/bench/wrk-post.lua: one thread, pinned, a
 * fixed POST body and headers; returns the summary the Lua `done` hook prints.
 */
import { join } from "node:path";
import type { Subprocess } from "bun";
import { childEnv, REPO_ROOT } from "./proc";

export interface WrkResult {
  connections: number;
  /** Responses received (any status). */
  requests: number;
  /** Responses with a status below 400: the completed requests. */
  ok: number;
  seconds: number;
  /** Completed (status < 400) requests per second. */
  rps: number;
  /** Responses with status >= 400 plus socket errors and timeouts. */
  errors: number;
  errorDetail: Record<string, number>;
  latencyUs: { p50: number; p90: number; p99: number; max: number; mean: number };
  /** CPU seconds per second that wrk itself used. */
  wrkCpu: number;
}

export interface WrkOptions {
  url: string;
  bodyFile: string;
  headers: Record<string, string>;
  connections: number;
  seconds: number;
  core: number | null;
  /** wrk's own per-request timeout. */
  timeoutSeconds?: number;
  /** Spread the requests round-robin over this many users (`${prefix}0` …), each connected beforehand. */
  users?: { count: number; prefix: string };
  /** Stop after sending this many requests (`seconds` is then only a bound); see wrk-post.lua. */
  stopAfter?: number;
}

export async function runWrk(o: WrkOptions): Promise<WrkResult> {
  const argv = [
    "wrk",
    "-t1",
    `-c${o.connections}`,
    `-d${o.seconds}s`,
    `--timeout`,
    `${o.timeoutSeconds ?? 10}s`,
    "-s",
    join(REPO_ROOT, "scripts/bench/wrk-post.lua"),
    o.url,
  ];
  const proc = Bun.spawn(o.core === null ? argv : ["taskset", "-c", String(o.core), ...argv], {
    env: childEnv({
      BENCH_BODY_FILE: o.bodyFile,
      BENCH_HEADERS: Object.entries(o.headers)
        .map(([k, v]) => `${k}: ${v}`)
        .join("\n"),
      ...(o.users ? { BENCH_USERS: String(o.users.count), BENCH_USER_PREFIX: o.users.prefix } : {}),
      ...(o.stopAfter ? { BENCH_STOP_AFTER: String(o.stopAfter) } : {}),
    }),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  // wrk stops by itself after -d; this is only a guard against a hung run.
  const guard = setTimeout(() => proc.kill("SIGKILL"), (o.seconds + 30) * 1000);
  const [stdout, stderr] = await Promise.all([readStdout(proc, o.stopAfter !== undefined), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(guard);
  const line = stdout.split("\n").find((l) => l.startsWith("BENCH_JSON "));
  if (!line) throw new Error(`wrk printed no summary (exit ${proc.exitCode}):\n${stdout}\n${stderr}`);
  const s = JSON.parse(line.slice("BENCH_JSON ".length)) as {
    requests: number;
    duration_us: number;
    errors: Record<string, number>;
    latency_us: WrkResult["latencyUs"];
  };
  const seconds = s.duration_us / 1e6;
  const errors = Object.values(s.errors).reduce((a, b) => a + b, 0);
  const usage = proc.resourceUsage();
  const cpuUs = usage ? Number(usage.cpuTime.total) : NaN;
  return {
    connections: o.connections,
    requests: s.requests,
    ok: s.requests - (s.errors.status ?? 0),
    seconds,
    rps: (s.requests - (s.errors.status ?? 0)) / seconds,
    errors,
    errorDetail: s.errors,
    latencyUs: s.latency_us,
    wrkCpu: cpuUs / 1e6 / seconds,
  };
}

/** How long after BENCH_STOPPED SIGINT is sent, and again, until wrk exits (see readStdout). */
const SIGNAL_EVERY_MS = 100;

/**
 * wrk's stdout; with a request count, SIGINT once the Lua script says it has sent them
 * all (wrk's main thread would otherwise sleep out -d before printing its summary).
 * wrk starts its threads before it installs its SIGINT handler and then sleeps; the
 * handler only sets a flag. A count small enough to be sent within that window (`profile.ts
 * --users 1`'s one first call) had its signal handled before the sleep began, which then
 * ran its whole -d. So the signal goes a moment after the line (not into the window before
 * the handler, which would kill wrk without its summary) and again until wrk exits. With
 * such a count wrk's thread also misses its own stop and sends until the signal (about
 * 10,000 calls to a trivial server in its 0.1 s): the count is then a lower bound, which is
 * all a pass that must call every user once asks of it.
 */
async function readStdout(proc: Subprocess<"ignore", "pipe", "pipe">, stopOnSignal: boolean): Promise<string> {
  let text = "";
  let signals: ReturnType<typeof setInterval> | null = null;
  const decoder = new TextDecoder();
  try {
    for await (const chunk of proc.stdout) {
      text += decoder.decode(chunk, { stream: true });
      if (stopOnSignal && signals === null && text.includes("BENCH_STOPPED")) {
        signals = setInterval(() => proc.kill("SIGINT"), SIGNAL_EVERY_MS);
      }
    }
  } finally {
    if (signals !== null) clearInterval(signals);
  }
  return text + decoder.decode();
}
