/**
 * One sample every few seconds while the load runs: the proxy's resident memory
 * (/proc/<pid>/status VmRSS), the SQLite file and its WAL, what /healthz says about the
 * usage writer, Redis's memory and key count, and the requests and latencies since the
 * previous sample. One line is printed per sample.
 */
import { statSync } from "node:fs";
import type Redis from "ioredis";
import { cpuSeconds, memoryMb } from "../bench/lib/proc";
import type { Tally } from "./driver";
import { fixed, mb, percentile } from "./stats";
import { SOAK_METRICS_TOKEN } from "./stack";

export interface Sample {
  /** Seconds since the load started. */
  t: number;
  rssMb: number;
  /** The proxy's CPU use since the previous sample, in cores (1 = one core busy). */
  cpu: number;
  walBytes: number;
  dbBytes: number;
  /** Responses since the previous sample, by status. */
  statuses: Record<string, number>;
  errors: number;
  inFlight: number;
  skipped: number;
  jsonMs: { p50: number; p99: number; n: number };
  sseFirstByteMs: { p50: number; p99: number; n: number };
  refusedMs: { p50: number; p99: number; n: number };
  writer: { written: number; pending: number; failedFlushes: number } | null;
  activeStreams: number | null;
  limiterDegraded: boolean | null;
  budgetOk: boolean | null;
  redisUsedBytes: number | null;
  redisKeys: number | null;
}

const fileSize = (path: string) => {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
};

interface Health {
  writer: { written: number; pending: number; failedFlushes: number };
  activeStreams: number;
  limiter: { degraded: boolean };
  budget: { ok: boolean };
}

export async function readHealth(baseUrl: string): Promise<Health | null> {
  try {
    const response = await fetch(`${baseUrl}/healthz`, { headers: { authorization: `Bearer ${SOAK_METRICS_TOKEN}` }, signal: AbortSignal.timeout(5000) });
    return (await response.json()) as Health;
  } catch {
    return null;
  }
}

export class Sampler {
  readonly samples: Sample[] = [];
  private previous = new Map<string, number>();
  private previousErrors = 0;
  private previousCpu: { at: number; seconds: number };

  constructor(
    private readonly pid: number,
    private readonly databasePath: string,
    private readonly baseUrl: string,
    private readonly redis: Redis,
    private readonly tally: Tally,
    private readonly t0: number,
  ) {
    this.previousCpu = { at: performance.now(), seconds: cpuSeconds(pid) };
  }

  async take(): Promise<Sample> {
    const [health, redisInfo, redisKeys] = await Promise.all([
      readHealth(this.baseUrl),
      this.redis.info("memory").catch(() => null),
      this.redis.dbsize().catch(() => null),
    ]);
    const statuses: Record<string, number> = {};
    for (const [status, n] of this.tally.byStatus) {
      const delta = n - (this.previous.get(status) ?? 0);
      if (delta > 0) statuses[status] = delta;
      this.previous.set(status, n);
    }
    const errors = this.tally.errorCount;
    const window = this.tally.takeWindow();
    const cpu = { at: performance.now(), seconds: cpuSeconds(this.pid) };
    const pct = (values: number[]) => ({ p50: percentile(values, 50), p99: percentile(values, 99), n: values.length });
    const sample: Sample = {
      t: Math.round((performance.now() - this.t0) / 100) / 10,
      rssMb: memoryMb(this.pid).rss,
      cpu: (cpu.seconds - this.previousCpu.seconds) / ((cpu.at - this.previousCpu.at) / 1000),
      walBytes: fileSize(`${this.databasePath}-wal`),
      dbBytes: fileSize(this.databasePath),
      statuses,
      errors: errors - this.previousErrors,
      inFlight: this.tally.inFlight,
      skipped: this.tally.skipped,
      jsonMs: pct(window.json),
      sseFirstByteMs: pct(window.sseFirstByte),
      refusedMs: pct(window.refused),
      writer: health ? health.writer : null,
      activeStreams: health ? health.activeStreams : null,
      limiterDegraded: health ? health.limiter.degraded : null,
      budgetOk: health ? health.budget.ok : null,
      redisUsedBytes: redisInfo ? Number(/used_memory:(\d+)/.exec(redisInfo)?.[1] ?? NaN) : null,
      redisKeys,
    };
    this.previousErrors = errors;
    this.previousCpu = cpu;
    this.samples.push(sample);
    return sample;
  }
}

export function formatSample(s: Sample): string {
  const statuses =
    Object.entries(s.statuses)
      .map(([k, v]) => `${k}:${v}`)
      .join(" ") || "none";
  const w = s.writer;
  return [
    `t=${fixed(s.t, 0).padStart(4)}s`,
    `rss=${fixed(s.rssMb)}MB`,
    `cpu=${fixed(s.cpu, 2)}`,
    `wal=${fixed(mb(s.walBytes), 2)}MB`,
    `db=${fixed(mb(s.dbBytes), 2)}MB`,
    `responses[${statuses}]`,
    `errors=${s.errors}`,
    `inflight=${s.inFlight}`,
    `json p50/p99=${fixed(s.jsonMs.p50)}/${fixed(s.jsonMs.p99)}ms`,
    `sse first byte p50/p99=${fixed(s.sseFirstByteMs.p50)}/${fixed(s.sseFirstByteMs.p99)}ms`,
    `rows=${w ? `${w.written} pending=${w.pending}` : "?"}`,
    `streams=${s.activeStreams ?? "?"}`,
    `redis=${s.redisUsedBytes === null ? "?" : fixed(mb(s.redisUsedBytes), 2)}MB/${s.redisKeys ?? "?"}keys`,
    s.skipped > 0 ? `skipped=${s.skipped}` : "",
    s.limiterDegraded ? "LIMITER DEGRADED" : "",
    s.budgetOk === false ? "BUDGET NOT OK" : "",
  ]
    .filter((x) => x !== "")
    .join(" ");
}
