/**
 * CPU per call over a fixed number of calls (issue 35, "cost per call"): wrk sends N
 * requests at concurrency c and stops (wrk-post.lua's BENCH_STOP_AFTER); the calls are
 * counted where they were served (the upstream's counter, so the requests wrk cut in flight
 * count too), and each component's CPU comes from /proc (utime + stime, every thread; a
 * process tree for PostgreSQL) between a reading before the load and one after the last
 * call was served and a flush interval more, so the work a call leaves behind (its ledger
 * row, a batched settle) is inside the window.
 */
import { cpuSeconds } from "./proc";
import { runWrk, type WrkOptions } from "./wrk";

export interface FixedCallsRun {
  shape: "json" | "sse";
  connections: number;
  /** Users the calls were spread over (1: every call for the same user). */
  users: number;
  /** Requests wrk was told to send. */
  requested: number;
  /** Chat calls the upstream served in the window: the divisor. */
  calls: number;
  /** 2xx responses wrk counted (the ones cut in flight are not among them). */
  completedAtLoader: number;
  errors: number;
  /** Ledger rows written for these calls, when the arm has a ledger (may trail by a flush). */
  rows: number | null;
  /** Wall time of the load itself, and calls per second over it. */
  seconds: number;
  callsPerSecond: number;
  /** CPU microseconds per call, per component (sut, upstream, redis, postgres, …). */
  cpuUsPerCall: Record<string, number>;
  /**
   * Cores each component kept busy during the load (1.00 = a whole core): the process under
   * test near 1.00 says the loader kept it saturated; "loader" is wrk's own share of core 0.
   */
  busy: Record<string, number>;
}

export interface FixedCallsOptions {
  wrk: Omit<WrkOptions, "seconds" | "stopAfter">;
  shape: "json" | "sse";
  calls: number;
  /** A bound on the load, whatever happens (wrk stops by itself long before). */
  maxSeconds: number;
  /** Calls served so far (the upstream's counter). */
  served: () => Promise<number>;
  /** Single processes (/proc/<pid>/stat), by component name. */
  pids: Record<string, number>;
  /** Process trees (PostgreSQL), by component name: CPU seconds so far. */
  trees?: Record<string, () => number>;
  /** Ledger rows so far (read outside the window): rows written for the calls, in the result. */
  rows?: () => Promise<number>;
}

/** Reads every component's CPU seconds so far. */
function readCpu(pids: Record<string, number>, trees: Record<string, () => number>): Record<string, number> {
  return {
    ...Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuSeconds(pid)])),
    ...Object.fromEntries(Object.entries(trees).map(([name, read]) => [name, read()])),
  };
}

/** Polls until `read` gives the same value twice 150 ms apart (at most `boundMs`). */
async function settled(read: () => Promise<number>, boundMs: number): Promise<number> {
  const deadline = Date.now() + boundMs;
  let last = await read();
  for (;;) {
    await Bun.sleep(150);
    const now = await read();
    if (now === last || Date.now() > deadline) return now;
    last = now;
  }
}

export async function runFixedCalls(o: FixedCallsOptions): Promise<FixedCallsRun> {
  const trees = o.trees ?? {};
  // What an earlier run left (calls its wrk cut, their rows) must not fall in the window.
  await settled(o.served, 10_000);
  await Bun.sleep(600);
  const servedBefore = await o.served();
  const rowsBefore = o.rows ? await o.rows() : 0;
  const cpuBefore = readCpu(o.pids, trees);
  const t0 = performance.now();
  const wrk = await runWrk({ ...o.wrk, seconds: o.maxSeconds, stopAfter: o.calls });
  const loadSeconds = (performance.now() - t0) / 1000;
  const cpuAtEnd = readCpu(o.pids, trees);
  // The calls wrk cut are still being served; then their rows are written.
  const calls = (await settled(o.served, 10_000)) - servedBefore;
  // Then the writer's last flush (every 100 ms) and a PostgreSQL batch's commit. Rows are
  // counted only after the window: a count over the ledger would cost PostgreSQL CPU in it.
  await Bun.sleep(600);
  const cpuAfter = readCpu(o.pids, trees);
  const rows = o.rows ? (await o.rows()) - rowsBefore : null;
  const cpuUsPerCall = Object.fromEntries(Object.keys(cpuAfter).map((name) => [name, ((cpuAfter[name]! - cpuBefore[name]!) * 1e6) / calls]));
  const busy = Object.fromEntries(Object.keys(cpuAtEnd).map((name) => [name, (cpuAtEnd[name]! - cpuBefore[name]!) / loadSeconds]));
  busy.loader = wrk.wrkCpu;
  return {
    shape: o.shape,
    connections: o.wrk.connections,
    users: o.wrk.users?.count ?? 1,
    requested: o.calls,
    calls,
    completedAtLoader: wrk.ok,
    errors: wrk.errors,
    rows,
    seconds: loadSeconds,
    callsPerSecond: calls / loadSeconds,
    cpuUsPerCall,
    busy,
  };
}
