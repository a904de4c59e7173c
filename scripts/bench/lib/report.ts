/**
 * Results of a run, and its Markdown tables, written to a file of their own beside the
 * run's JSON (BENCHMARKS.md quotes a summary of them by hand).
 */
import { writeFileSync } from "node:fs";
import type { ArmId } from "./arms";
import type { Machine, QuietWait } from "./machine";
import type { WrkResult } from "./wrk";
import type { FixedCallsRun } from "./fixed-calls";
import type { ManyUsersRun } from "./many-users";
import type { TwoProcessesRun } from "./two-processes";
import { renderCostPerCall, renderManyUsers, renderSizing, renderSummary, renderTwoProcesses, scaleTargets, type Target } from "./report-scale";

export interface ThroughputRun extends WrkResult {
  shape: "json" | "sse";
  /** CPU seconds per second, per process (1.0 = one core busy). */
  cpu: Record<string, number>;
  rowsWritten: number | null;
  upstreamServed: number;
}

interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

export interface SequentialResult {
  requests: number;
  stream: boolean;
  headersUs: Percentiles;
  firstByteUs: Percentiles;
  totalUs: Percentiles;
}

export interface LongRun {
  streams: number;
  rssBeforeMb: number;
  peakRssMb: number;
  peakFrom: string;
  client: { streams: number; completed: number; peakOpen: number; allOpenAfterMs: number | null; seconds: number; failures: Record<string, number> };
}

export interface ArmResult {
  id: ArmId;
  label: string;
  throughput: ThroughputRun[];
  sequential: Partial<Record<"json" | "sse", SequentialResult>>;
  idleRssMb?: number;
  longStreams: LongRun[];
  /** Service arms: ledger rows against the chat requests the upstream served for them. */
  rows: {
    upstreamServed: number;
    ledgerRows: number;
    lost: number;
    byStatus: Record<string, number> /** PostgreSQL arms: sum of usage_totals.request_count at the end. */;
    totalsRequestCount?: number;
  } | null;
  /** 2xx responses the clients received from this arm, over the whole run. */
  clientCompleted: number;
  /** CPU per call over a fixed number of calls, one user and (service arms) many users. */
  fixedCalls?: FixedCallsRun[];
  /** Service arms: the load spread over many users against one user. */
  manyUsers?: ManyUsersRun[];
  /** How long connecting the many users took. */
  usersConnected?: { users: number; seconds: number };
  /** (g2): two service processes against one. */
  twoProcesses?: TwoProcessesRun[];
  error?: string;
}

export interface WriterResult {
  rows: number;
  accounts: number;
  ids: "random" | "v7";
  prefill: number;
  seconds: number;
  rowsPerSecond: number;
  lost: number;
}

export interface BenchResults {
  startedAt: string;
  finishedAt: string;
  machine: Machine;
  quiet: QuietWait;
  loadAtStart: number;
  loadAtEnd: number;
  config: Record<string, unknown>;
  cores: { client: number; sut: number };
  writer: WriterResult[];
  upstreamCheck: Array<{ upstream: string; shape: string; rps: number; errors: number }>;
  arms: ArmResult[];
}

const int = (n: number) => Math.round(n).toLocaleString("en-US");
const ms = (us: number) => (us / 1000).toFixed(us < 10_000 ? 3 : 1);
const ratio = (value: number | undefined, base: number | undefined) =>
  value === undefined || base === undefined || !Number.isFinite(value / base) || base === 0 ? "–" : `${(value / base).toFixed(2)}×`;
const cell = (value: string, r: string) => (r === "–" ? value : `${value} (${r})`);

function run(arm: ArmResult | undefined, shape: "json" | "sse", c: number): ThroughputRun | undefined {
  return arm?.throughput.find((t) => t.shape === shape && t.connections === c);
}

export function renderTables(r: BenchResults): string {
  const arm = (id: ArmId) => r.arms.find((a) => a.id === id);
  const b = arm("b");
  const a = arm("a");
  const conns = (r.config.connections as number[]) ?? [16, 64, 256];
  const out: string[] = [];
  const cfg = r.config;
  const usesPostgres = r.arms.some((x) => x.id === "f" || x.id === "g");
  out.push(
    `Run ${r.startedAt} → ${r.finishedAt} (UTC). Machine: ${r.machine.cpus} × ${r.machine.cpuModel}, ${r.machine.memoryGb} GB RAM, ${r.machine.kernel}; Bun ${r.machine.bun}, Node ${r.machine.node} (Portkey ${r.machine.portkey}), ${r.machine.wrk}, redis-server ${r.machine.redis}${r.machine.postgres ? `, PostgreSQL ${r.machine.postgres}` : ""}.`,
  );
  out.push(
    `Load average ${r.loadAtStart} at start, ${r.loadAtEnd} at end; ${r.quiet.quiet ? `machine quiet (waited ${r.quiet.waitedSeconds} s)` : `**machine was not quiet** (waited ${r.quiet.waitedSeconds} s; load ${r.quiet.loadAtStart}, ${r.quiet.otherTestRunsAtStart} other test runs)`}. wrk: 1 thread, ${cfg.seconds} s per cell after a ${cfg.warmup} s warm-up per shape; upstream: ${cfg.upstream}. Pinned: process under test alone on core ${r.cores.sut}; wrk, clients, upstream, redis-server${usesPostgres ? " and PostgreSQL (fsync on; postmaster and backends)" : ""} on core ${r.cores.client}.`,
  );
  out.push("");
  out.push("Every figure in parentheses is the ratio to (b), the bare Bun forwarder, from this same run.");
  out.push("");
  out.push(...renderSummary(r));

  out.push("### Throughput (completed requests per second)");
  out.push("");
  out.push(`| arm | ${conns.map((c) => `JSON c=${c}`).join(" | ")} | ${conns.map((c) => `SSE c=${c}`).join(" | ")} |`);
  out.push(`| --- | ${conns.map(() => "---:").join(" | ")} | ${conns.map(() => "---:").join(" | ")} |`);
  for (const x of r.arms) {
    if (x.error) {
      out.push(`| ${x.label} | failed: ${x.error.replaceAll("|", "/").slice(0, 120)} |`);
      continue;
    }
    const cells = (["json", "sse"] as const).flatMap((s) =>
      conns.map((c) => {
        const t = run(x, s, c);
        if (!t) return "–";
        const err = t.errors > 0 ? ` ⚠${int(t.errors)} err` : "";
        return cell(int(t.rps), ratio(t.rps, run(b, s, c)?.rps)) + err;
      }),
    );
    out.push(`| ${x.label} | ${cells.join(" | ")} |`);
  }
  out.push("");

  out.push("### What each process used at c=64 (CPU cores busy; 1.00 = one whole core)");
  out.push("");
  const cpuKeys = usesPostgres ? ["sut", "upstream", "redis", "postgres", "wrk"] : ["sut", "upstream", "redis", "wrk"];
  const cpuHead = usesPostgres ? "under test / upstream / redis / postgres / wrk" : "under test / upstream / redis / wrk";
  out.push(`| arm | JSON: ${cpuHead} | SSE: ${cpuHead} | JSON p99 at c=64 (ms) | SSE p99 at c=64 (ms) |`);
  out.push("| --- | --- | --- | ---: | ---: |");
  for (const x of r.arms) {
    const f = (t: ThroughputRun | undefined) => (t ? cpuKeys.map((k) => (t.cpu[k] === undefined ? "–" : t.cpu[k]!.toFixed(2))).join(" / ") : "–");
    const j = run(x, "json", 64);
    const s = run(x, "sse", 64);
    out.push(
      `| ${x.label} | ${f(j)} | ${f(s)} | ${j ? cell(ms(j.latencyUs.p99), ratio(j.latencyUs.p99, run(b, "json", 64)?.latencyUs.p99)) : "–"} | ${s ? cell(ms(s.latencyUs.p99), ratio(s.latencyUs.p99, run(b, "sse", 64)?.latencyUs.p99)) : "–"} |`,
    );
  }
  out.push("");

  const seqA = a?.sequential;
  out.push(
    `### One request at a time (${int((cfg.sequential as number) ?? 0)} requests each, after ${int(Math.ceil(((cfg.sequential as number) ?? 0) / 10))} warm-up; ms)`,
  );
  out.push("");
  out.push("\"Added\" is the arm's percentile minus the direct arm's. TTFB is the time to the first body chunk of a 20-chunk stream.");
  out.push("");
  out.push("| arm | JSON p50 | JSON p99 | added p50 | added p99 | SSE TTFB p50 | SSE TTFB p99 | added TTFB p50 | added TTFB p99 | SSE complete p50 |");
  out.push("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  const added = (x: ArmResult | undefined, shape: "json" | "sse", metric: "totalUs" | "firstByteUs", p: "p50" | "p99") => {
    const v = x?.sequential[shape]?.[metric][p];
    const base = seqA?.[shape]?.[metric][p];
    return v === undefined || base === undefined ? undefined : v - base;
  };
  for (const x of r.arms) {
    const j = x.sequential.json;
    const s = x.sequential.sse;
    if (!j || !s) continue;
    const addedCell = (shape: "json" | "sse", metric: "totalUs" | "firstByteUs", p: "p50" | "p99") => {
      const v = added(x, shape, metric, p);
      if (v === undefined || x.id === "a") return "–";
      return cell(ms(v), ratio(v, added(b, shape, metric, p)));
    };
    const abs = (shape: "json" | "sse", metric: "totalUs" | "firstByteUs", p: "p50" | "p99") =>
      cell(ms(x.sequential[shape]![metric][p]), ratio(x.sequential[shape]![metric][p], b?.sequential[shape]?.[metric][p]));
    out.push(
      `| ${x.label} | ${abs("json", "totalUs", "p50")} | ${abs("json", "totalUs", "p99")} | ${addedCell("json", "totalUs", "p50")} | ${addedCell("json", "totalUs", "p99")} | ` +
        `${abs("sse", "firstByteUs", "p50")} | ${abs("sse", "firstByteUs", "p99")} | ${addedCell("sse", "firstByteUs", "p50")} | ${addedCell("sse", "firstByteUs", "p99")} | ${abs("sse", "totalUs", "p50")} |`,
    );
  }
  out.push("");

  out.push("### Concurrent long streams (50 chunks, 100 ms apart; about 5 s each; a fresh process for each count)");
  out.push("");
  const streams = (cfg.streams as number[]) ?? [1000, 2000];
  out.push(
    `| arm | idle RSS (MB) | ${streams.map((n) => `peak RSS, ${int(n)} streams (MB)`).join(" | ")} | ${streams.map((n) => `completed of ${int(n)}`).join(" | ")} |`,
  );
  out.push(`| --- | ---: | ${streams.map(() => "---:").join(" | ")} | ${streams.map(() => "---:").join(" | ")} |`);
  for (const x of r.arms) {
    if (x.longStreams.length === 0) continue;
    const peak = (n: number) => x.longStreams.find((l) => l.streams === n);
    const base = (n: number) => b?.longStreams.find((l) => l.streams === n)?.peakRssMb;
    out.push(
      `| ${x.label} | ${cell((x.idleRssMb ?? NaN).toFixed(1), ratio(x.idleRssMb, b?.idleRssMb))} | ${streams.map((n) => cell((peak(n)?.peakRssMb ?? NaN).toFixed(1), ratio(peak(n)?.peakRssMb, base(n)))).join(" | ")} | ` +
        `${streams
          .map((n) => {
            const l = peak(n);
            return l
              ? `${int(l.client.completed)}${
                  Object.keys(l.client.failures).length
                    ? ` (${Object.entries(l.client.failures)
                        .map(([k, v]) => `${v}× ${k}`)
                        .join(", ")})`
                    : ""
                }`
              : "–";
          })
          .join(" | ")} |`,
    );
  }
  out.push("");

  out.push("### Usage rows");
  out.push("");
  out.push(
    "| arm | rows/s at JSON c=64 | rows/s at SSE c=64 | best rows/s | chat requests the upstream served | rows in the ledger | rows lost | 2xx at the clients | ledger rows by status |",
  );
  out.push("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
  for (const x of r.arms) {
    if (!x.rows) continue;
    const rowsPerSecond = (t: ThroughputRun | undefined) => (t && t.rowsWritten !== null ? t.rowsWritten / t.seconds : undefined);
    const best = Math.max(...x.throughput.map((t) => rowsPerSecond(t) ?? 0));
    const j = rowsPerSecond(run(x, "json", 64));
    const s = rowsPerSecond(run(x, "sse", 64));
    out.push(
      `| ${x.label} | ${j === undefined ? "–" : cell(int(j), ratio(j, run(b, "json", 64)?.rps))} | ${s === undefined ? "–" : cell(int(s), ratio(s, run(b, "sse", 64)?.rps))} | ${int(best)} | ${int(x.rows.upstreamServed)} | ${int(x.rows.ledgerRows)} | **${int(x.rows.lost)}** | ${int(x.clientCompleted)} | ${Object.entries(
        x.rows.byStatus,
      )
        .map(([k, v]) => `${k}: ${int(v)}`)
        .join(", ")} |`,
    );
  }
  out.push("");
  out.push(
    "rows/s is compared with (b)'s requests per second in the same cell: a proxy that meters every request it completes writes as many rows per second as it serves requests.",
  );
  out.push("");

  out.push("### Usage writer on its own (`scripts/bench/usage-writer.ts`, real SQLite file, WAL)");
  out.push("");
  out.push(
    "The ratio compares rows/s with (b)'s JSON requests per second at c=64: above 1.00× the writer keeps up with the fastest proxy this runtime allows.",
  );
  out.push("");
  out.push("| rows written | budget accounts | rows already in the ledger | request ids | seconds | rows/s | lost |");
  out.push("| ---: | ---: | ---: | --- | ---: | ---: | ---: |");
  const bJson64 = run(b, "json", 64)?.rps;
  for (const w of r.writer) {
    const ids = w.ids === "v7" ? "UUIDv7, time-ordered (as the service makes them)" : "random UUIDv4 (as it made them before; for comparison)";
    out.push(
      `| ${int(w.rows)} | ${int(w.accounts)} | ${int(w.prefill)} | ${ids} | ${w.seconds} | ${cell(int(w.rowsPerSecond), ratio(w.rowsPerSecond, bJson64))} | ${int(w.lost)} |`,
    );
  }
  out.push("");

  if (r.upstreamCheck.length > 0) {
    const direct = (shape: string) => run(a, shape as "json" | "sse", 64)?.rps;
    out.push("### The upstream is not the limit");
    out.push("");
    out.push("| upstream, alone on the SUT core, c=64 | JSON req/s | SSE req/s |");
    out.push("| --- | ---: | ---: |");
    const check = (shape: string) => r.upstreamCheck.find((u) => u.shape === shape)?.rps;
    out.push(
      `| packages/mock-upstream/src (the demo mock) | ${cell(int(check("json") ?? NaN), ratio(check("json"), run(b, "json", 64)?.rps))} | ${cell(int(check("sse") ?? NaN), ratio(check("sse"), run(b, "sse", 64)?.rps))} |`,
    );
    out.push(
      `| scripts/bench/upstream.ts --kind lean (used for every arm) | ${cell(int(direct("json") ?? NaN), ratio(direct("json"), run(b, "json", 64)?.rps))} | ${cell(int(direct("sse") ?? NaN), ratio(direct("sse"), run(b, "sse", 64)?.rps))} |`,
    );
    out.push("");
  }

  out.push(...renderCostPerCall(r), ...renderManyUsers(r), ...renderSizing(r), ...renderTwoProcesses(r));

  out.push("### Targets");
  out.push("");
  out.push("| target | measured | met? |");
  out.push("| --- | --- | --- |");
  for (const t of targets(r)) out.push(`| ${t.target} | ${t.measured} | ${t.met === null ? "not measured" : t.met ? "met" : "**missed**"} |`);
  return out.join("\n");
}

export function targets(r: BenchResults): Target[] {
  const arm = (id: ArmId) => r.arms.find((a) => a.id === id);
  // Issue 35's first; the ratios to (b) of earlier issues are context in the tables now.
  const out: Target[] = scaleTargets(r);
  const a = arm("a");
  // (c), (d) always (a missing arm reads "not measured"); the PostgreSQL arms when they ran.
  const serviceArms: Array<"c" | "d" | "f" | "g"> = ["c", "d", ...(["f", "g"] as const).filter((id) => arm(id))];
  for (const id of serviceArms) {
    const x = arm(id);
    const add = (shape: "json" | "sse", metric: "totalUs" | "firstByteUs", p: "p50" | "p99") => {
      const v = x?.sequential[shape]?.[metric][p];
      const base = a?.sequential[shape]?.[metric][p];
      return v === undefined || base === undefined ? undefined : (v - base) / 1000;
    };
    const p50 = add("json", "totalUs", "p50");
    const p99 = add("json", "totalUs", "p99");
    const ttfb = add("sse", "firstByteUs", "p50");
    out.push({
      target: `(${id}) added p50 ≤ 0.5 ms, one at a time`,
      measured: p50 === undefined ? "–" : `${p50.toFixed(3)} ms`,
      met: p50 === undefined ? null : p50 <= 0.5,
    });
    out.push({
      target: `(${id}) added p99 ≤ 2 ms, one at a time`,
      measured: p99 === undefined ? "–" : `${p99.toFixed(3)} ms`,
      met: p99 === undefined ? null : p99 <= 2,
    });
    out.push({
      target: `(${id}) added TTFB (p50) ≤ 1 ms`,
      measured: ttfb === undefined ? "–" : `${ttfb.toFixed(3)} ms`,
      met: ttfb === undefined ? null : ttfb <= 1,
    });
    const l = x?.longStreams.find((s) => s.streams === 2000);
    out.push({
      target: `(${id}) 2,000 concurrent long streams < 150 MB RSS`,
      measured: l ? `${l.peakRssMb.toFixed(1)} MB, ${l.client.completed} completed` : "–",
      met: l ? l.peakRssMb < 150 && l.client.completed === 2000 : null,
    });
    for (const shape of ["json", "sse"] as const) {
      const mine = run(x, shape, 64)?.rps;
      const portkey = run(arm("e"), shape, 64)?.rps;
      const k = mine !== undefined && portkey ? mine / portkey : undefined;
      out.push({
        target: `(${id}) ≥ 20× Portkey's throughput at c=64, ${shape.toUpperCase()}`,
        measured: k === undefined ? "–" : `${k.toFixed(1)}×`,
        met: k === undefined ? null : k >= 20,
      });
    }
    out.push({
      target: `(${id}) rows written = requests completed (0 lost)`,
      measured: x?.rows
        ? `${x.rows.ledgerRows} rows for ${x.rows.upstreamServed} upstream calls (${x.clientCompleted} 2xx at the clients)` +
          (x.rows.totalsRequestCount === undefined ? "" : `; usage_totals.request_count ${x.rows.totalsRequestCount}`)
        : "–",
      met: x?.rows
        ? x.rows.lost === 0 &&
          x.rows.ledgerRows >= x.clientCompleted &&
          (x.rows.totalsRequestCount === undefined || x.rows.totalsRequestCount === x.rows.ledgerRows)
        : null,
    });
  }
  // Judged on the service as it is (v7 ids); the random-id run is the before.
  for (const w of r.writer.filter((x) => x.ids === "v7")) {
    out.push({
      target: `usage writer ≥ 50,000 rows/s (${int(w.accounts)} account${w.accounts === 1 ? "" : "s"}, ${int(w.prefill)} rows already in the ledger)`,
      measured: `${int(w.rowsPerSecond)} rows/s, ${int(w.lost)} lost`,
      met: w.rowsPerSecond >= 50_000 && w.lost === 0,
    });
  }
  return out;
}

export function renderReport(results: BenchResults, path: string): void {
  writeFileSync(path, `# npm run bench\n\n${renderTables(results)}\n`);
}
