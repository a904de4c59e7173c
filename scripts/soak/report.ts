/**
 * The resource checks (RSS flat, WAL bounded) from the samples, and the summary printed at
 * the end: one Markdown table, as docs/benchmarks-log.md quotes a run (BENCHMARKS.md's "Soak"
 * section sums up the last).
 */
import type { Machine } from "../bench/lib/machine";
import type { Tally } from "./driver";
import type { Check, LedgerFacts } from "./ledger-check";
import type { Sample } from "./sampler";
import { fixed, mb, mean, percentile, slope } from "./stats";

/** Runs shorter than this are too short to tell growth from warm-up; RSS is reported, not judged. */
export const MIN_MINUTES_TO_JUDGE_RSS = 5;
/** RSS may end at most this much above its level after warm-up (a fraction of it). */
const RSS_GROWTH_ALLOWED = 0.1;
/** WAL bound: this many autocheckpoint thresholds (SQLite checkpoints when a commit crosses one). */
const WAL_BOUND_CHECKPOINTS = 4;

export interface RssVerdict {
  firstMb: number;
  /** The last sample under load. */
  lastMb: number;
  /** Once every request had ended and the proxy had settled, before SIGTERM. */
  settledMb: number;
  maxMb: number;
  /** Mean over 20–40 % of the run (minutes 2–4 of 10): after warm-up. */
  baselineMb: number;
  /** Mean over the last 30 % (the last 3 minutes of 10). */
  finalMb: number;
  /** Least-squares slope over every sample after warm-up (the first 20 %), MB per minute. */
  slopeMbPerMin: number;
}

/** Judged on the samples taken while the load ran (not the tail while the last streams end). */
export function rssVerdict(samples: Sample[], seconds: number, sampleSeconds: number): { verdict: RssVerdict; check: Check } {
  const rss = samples.filter((s) => s.t <= seconds + sampleSeconds / 2).map((s) => ({ x: s.t, y: s.rssMb }));
  // One second of slack: a sample due at the end of a window lands a little after it.
  const within = (from: number, to: number) => rss.filter((p) => p.x >= from * seconds && p.x <= to * seconds + 1).map((p) => p.y);
  const verdict: RssVerdict = {
    firstMb: rss[0]?.y ?? NaN,
    lastMb: rss[rss.length - 1]?.y ?? NaN,
    settledMb: samples[samples.length - 1]?.rssMb ?? NaN,
    maxMb: Math.max(...rss.map((p) => p.y)),
    baselineMb: mean(within(0.2, 0.4)),
    finalMb: mean(within(0.7, 1)),
    slopeMbPerMin: slope(rss.filter((p) => p.x >= 0.2 * seconds).map((p) => ({ x: p.x / 60, y: p.y }))),
  };
  const growth = verdict.finalMb - verdict.baselineMb;
  const judged = seconds >= MIN_MINUTES_TO_JUDGE_RSS * 60;
  const detail = `mean ${fixed(verdict.baselineMb)} MB at 20–40 % of the run, ${fixed(verdict.finalMb)} MB over the last 30 % (${growth >= 0 ? "+" : ""}${fixed(growth)} MB, allowed +${fixed(verdict.baselineMb * RSS_GROWTH_ALLOWED)}); slope after warm-up ${fixed(verdict.slopeMbPerMin, 2)} MB/min`;
  return {
    verdict,
    check: judged
      ? { name: "RSS flat", ok: Number.isFinite(growth) && growth <= verdict.baselineMb * RSS_GROWTH_ALLOWED, detail }
      : { name: "RSS flat (not judged: run under 5 min)", ok: true, detail },
  };
}

export function walCheck(samples: Sample[], facts: LedgerFacts): { maxBytes: number; boundBytes: number; check: Check } {
  const maxBytes = Math.max(0, ...samples.map((s) => s.walBytes));
  const boundBytes = WAL_BOUND_CHECKPOINTS * facts.walAutocheckpointPages * facts.pageSize;
  return {
    maxBytes,
    boundBytes,
    check: {
      name: "WAL bounded",
      ok: maxBytes <= boundBytes,
      detail: `max ${fixed(mb(maxBytes), 2)} MB; bound ${fixed(mb(boundBytes), 1)} MB = ${WAL_BOUND_CHECKPOINTS} × wal_autocheckpoint (${facts.walAutocheckpointPages} pages of ${facts.pageSize} B)`,
    },
  };
}

export interface SoakSummary {
  command: string;
  startedAt: string;
  finishedAt: string;
  machine: Machine;
  loadAverage: { start: number; end: number };
  otherTestRuns: { start: number; end: number };
  config: Record<string, unknown>;
  tally: Tally;
  facts: LedgerFacts;
  rss: RssVerdict;
  proxyCpu: { mean: number; max: number };
  wal: { maxBytes: number; boundBytes: number; afterExitBytes: number };
  dbBytes: number;
  redis: { firstBytes: number | null; lastBytes: number | null; maxKeys: number | null };
  proxyExitCode: number | null;
  logs: { warn: number; error: number; stderr: number };
  checks: Check[];
}

const int = (n: number) => n.toLocaleString("en-US");
const ms = (values: number[]) => `${fixed(percentile(values, 50))} / ${fixed(percentile(values, 99))}`;

export function renderMarkdown(s: SoakSummary): string {
  const t = s.tally;
  const statuses = [...t.byStatus.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}: ${int(v)}`)
    .join(", ");
  const f = s.facts;
  const lines = [
    `Run ${s.startedAt} → ${s.finishedAt} (UTC), \`${s.command}\`. Machine: ${s.machine.cpus} × ${s.machine.cpuModel}, ${s.machine.memoryGb} GB RAM, ${s.machine.kernel}; Bun ${s.machine.bun}, redis-server ${s.machine.redis}. Load average ${s.loadAverage.start} at start, ${s.loadAverage.end} at end; \`bun test\` processes running at start / end: ${s.otherTestRuns.start} / ${s.otherTestRuns.end}.`,
    "",
    "| measure | value |",
    "| --- | --- |",
    `| requests started (open loop, ${s.config.rate}/s for ${s.config.minutes} min) | ${int(t.launched)} (${int(t.skipped)} skipped: ${s.config.maxInFlight} already in flight) |`,
    `| responses by status | ${statuses} |`,
    `| errors (anything but 200, 402 budget_exceeded, 429 rate_limited; failed fetches; malformed bodies) | **${int(t.errorCount)}**${t.errorCount ? ` (${[...t.errors.entries()].map(([k, v]) => `${v}× ${k}`).join(", ")})` : ""} |`,
    `| clients that left mid-stream | ${int(t.clientDisconnects)} |`,
    `| ledger rows / 200s at the client / generations the mock served | ${int(f.rows)} / ${int(f.completedAtClient)} / ${int(f.servedByMock)} |`,
    `| ledger rows by status; by cost source | ${Object.entries(f.rowsByStatus)
      .map(([k, v]) => `${k}: ${int(v)}`)
      .join(", ")}; ${Object.entries(f.rowsBySource)
      .map(([k, v]) => `${k}: ${int(v)}`)
      .join(", ")} |`,
    `| proxy RSS under load: first / last / max (MB); once settled | ${fixed(s.rss.firstMb)} / ${fixed(s.rss.lastMb)} / ${fixed(s.rss.maxMb)}; ${fixed(s.rss.settledMb)} |`,
    `| proxy CPU under load (cores busy: mean, max of the samples) | ${fixed(s.proxyCpu.mean, 2)}, ${fixed(s.proxyCpu.max, 2)} |`,
    `| proxy RSS mean at 20–40 % of the run → last 30 % (MB); slope after warm-up | ${fixed(s.rss.baselineMb)} → ${fixed(s.rss.finalMb)}; ${fixed(s.rss.slopeMbPerMin, 2)} MB/min |`,
    `| WAL max (bound) / after exit | ${fixed(mb(s.wal.maxBytes), 2)} MB (${fixed(mb(s.wal.boundBytes), 1)} MB) / ${fixed(mb(s.wal.afterExitBytes), 2)} MB |`,
    `| SQLite file at the end | ${fixed(mb(s.dbBytes), 1)} MB (${f.rows ? int(Math.round(s.dbBytes / f.rows)) : "–"} B per row) |`,
    `| Redis used memory first / last (MB); most keys | ${s.redis.firstBytes === null ? "–" : fixed(mb(s.redis.firstBytes), 2)} / ${s.redis.lastBytes === null ? "–" : fixed(mb(s.redis.lastBytes), 2)}; ${s.redis.maxKeys ?? "–"} |`,
    `| latency p50 / p99 (ms): JSON, whole body | ${ms(t.all.json)} (${int(t.all.json.length)} requests) |`,
    `| latency p50 / p99 (ms): short SSE, first body chunk | ${ms(t.all.sseFirstByte)} (${int(t.all.sseFirstByte.length)} requests) |`,
    `| latency p50 / p99 (ms): 402/429 answers | ${ms(t.all.refused)} (${int(t.all.refused.length)} requests) |`,
    `| peak requests in flight at the client | ${int(t.peakInFlight)} |`,
    `| proxy exit code after SIGTERM; warn / error log lines; stderr lines | ${s.proxyExitCode}; ${s.logs.warn} / ${s.logs.error}; ${s.logs.stderr} |`,
    "",
    "| check | result | detail |",
    "| --- | --- | --- |",
    ...s.checks.map((c) => `| ${c.name} | ${c.ok ? "pass" : "**FAIL**"} | ${c.detail.replaceAll("|", "/")} |`),
  ];
  return lines.join("\n");
}
