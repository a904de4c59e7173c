/**
 * Child processes of the benchmark: started pinned to one core with `taskset`, output kept
 * line by line, stopped by their own pid (SIGTERM, then SIGKILL after a bound). And what
 * /proc says about them: CPU ticks and resident memory.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { readLines } from "../../lib/read-lines";
import { resolve } from "node:path";
import type { Subprocess } from "bun";

/** Each port once per process (../../lib/free-port.ts). */
export { freePort } from "../../lib/free-port";

export const REPO_ROOT = resolve(import.meta.dir, "../../..");
export const BUN = process.execPath;

/** The benches' cores (2 here): the process under test alone on SUT_CORE; wrk, the upstream and the stores on CLIENT_CORE. */
export const CLIENT_CORE = 0;
export const SUT_CORE = 1;

/** The environment a child gets: only what it needs, plus `extra`. */
export function childEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of ["PATH", "HOME", "TMPDIR", "LANG"]) {
    const value = process.env[key];
    if (value !== undefined) env[key] = value;
  }
  return { ...env, ...extra };
}

export interface Child {
  name: string;
  pid: number;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  lines: string[];
  /** Resolves with the first stdout line that parses as a JSON object. */
  firstJson<T>(timeoutMs?: number): Promise<T>;
  /** SIGTERM; SIGKILL if still alive after `graceMs`. Resolves with the exit code. */
  stop(graceMs?: number): Promise<number | null>;
}

/** Spawns `cmd` pinned to `core` (null: not pinned). */
export function spawnPinned(name: string, core: number | null, cmd: string[], env: Record<string, string>, cwd = REPO_ROOT): Child {
  const argv = core === null ? cmd : ["taskset", "-c", String(core), ...cmd];
  const proc = Bun.spawn(argv, { cwd, env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const lines: string[] = [];
  const waiters: Array<() => void> = [];
  const collect = (stream: ReadableStream<Uint8Array>) =>
    readLines(stream, (batch) => {
      // Keep memory bounded for chatty children (the last 2,000 lines are enough).
      lines.push(...batch);
      if (lines.length > 2000) lines.splice(0, lines.length - 2000);
      for (const w of waiters.splice(0)) w();
    });
  void collect(proc.stdout);
  void collect(proc.stderr);

  return {
    name,
    pid: proc.pid,
    proc,
    lines,
    async firstJson<T>(timeoutMs = 15_000): Promise<T> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const line = lines.find((l) => l.startsWith("{"));
        if (line) return JSON.parse(line) as T;
        if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`${name} exited before it was ready:\n${lines.join("\n")}`);
        if (Date.now() > deadline) throw new Error(`${name} printed no JSON line in ${timeoutMs} ms:\n${lines.join("\n")}`);
        await Promise.race([new Promise<void>((r) => waiters.push(r)), Bun.sleep(100)]);
      }
    },
    async stop(graceMs = 10_000) {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      proc.kill("SIGTERM");
      const exited = await Promise.race([proc.exited.then(() => true), Bun.sleep(graceMs).then(() => false)]);
      if (!exited) {
        proc.kill("SIGKILL");
        await proc.exited;
      }
      return proc.exitCode;
    },
  };
}

const CLOCK_TICKS_PER_SECOND = Number(Bun.spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim()) || 100;

/** CPU seconds (user + system, all threads) the process has used so far. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may contain spaces) start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return NaN;
  }
}

/** VmRSS and VmHWM (peak RSS since start or the last reset) in MB. */
export function memoryMb(pid: number): { rss: number; hwm: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
    return { rss: kb("VmRSS") / 1024, hwm: kb("VmHWM") / 1024 };
  } catch {
    return { rss: NaN, hwm: NaN };
  }
}

/** Resets VmHWM to the current RSS (Linux: `5` to /proc/PID/clear_refs). */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    return false;
  }
}

/** Moves every thread of a running process to `core`. */
export function pin(pid: number, core: number): void {
  const r = Bun.spawnSync(["taskset", "-a", "-p", "-c", String(core), String(pid)]);
  if (r.exitCode !== 0) throw new Error(`taskset -a -p -c ${core} ${pid} failed: ${r.stderr.toString()}`);
}

/** CPU use of several processes over a stretch of time, as a fraction of one core each. */
export class CpuMeter {
  private readonly start: Map<string, number>;
  private readonly t0 = performance.now();

  constructor(private readonly pids: Record<string, number>) {
    this.start = new Map(Object.entries(pids).map(([name, pid]) => [name, cpuSeconds(pid)]));
  }

  read(): Record<string, number> {
    const seconds = (performance.now() - this.t0) / 1000;
    const out: Record<string, number> = {};
    for (const [name, pid] of Object.entries(this.pids)) out[name] = (cpuSeconds(pid) - this.start.get(name)!) / seconds;
    return out;
  }
}

/** Polls `url` until it answers with any HTTP status, within `timeoutMs`. */
export async function waitForHttp(url: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      await fetch(url, { signal: AbortSignal.timeout(1000) });
      return;
    } catch {
      await Bun.sleep(100);
    }
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}
