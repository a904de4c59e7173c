/**
 * results.md's tables for issue 35: the summary (one row per arm, as BENCHMARKS.md quotes
 * it), the cost per call, many users against one, the sizing table for operators, and two
 * service processes against one. Everything is computed from the run's own results.
 */
import type { ArmId } from "./arms";
import type { FixedCallsRun } from "./fixed-calls";
import { stolenPairs } from "./core-time";
import type { ArmResult, BenchResults, ThroughputRun } from "./report";

const int = (n: number) => Math.round(n).toLocaleString("en-US");
const us = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? "–" : n.toFixed(1));
const times = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? "–" : `${n.toFixed(2)}×`);

const throughputAt = (arm: ArmResult | undefined, shape: "json" | "sse", c = 64): ThroughputRun | undefined =>
  arm?.throughput.find((t) => t.shape === shape && t.connections === c);

/** The arm's cost-per-call run for a shape, with every call for one user or spread over many. */
export function fixedRun(arm: ArmResult | undefined, shape: "json" | "sse", spread: "one" | "many"): FixedCallsRun | undefined {
  return arm?.fixedCalls?.find((f) => f.shape === shape && (spread === "one" ? f.users === 1 : f.users > 1));
}

/** CPU µs per call of the process under test above (b)'s, same shape, one user. */
export function aboveBare(r: BenchResults, id: ArmId, shape: "json" | "sse", spread: "one" | "many" = "one"): number | undefined {
  const mine = fixedRun(
    r.arms.find((a) => a.id === id),
    shape,
    spread,
  )?.cpuUsPerCall.sut;
  const bare = fixedRun(
    r.arms.find((a) => a.id === "b"),
    shape,
    "one",
  )?.cpuUsPerCall.sut;
  return mine === undefined || bare === undefined ? undefined : mine - bare;
}

export function manyUsersRun(arm: ArmResult | undefined, shape: "json" | "sse") {
  return arm?.manyUsers?.find((m) => m.shape === shape);
}

export function renderSummary(r: BenchResults): string[] {
  const b = r.arms.find((a) => a.id === "b");
  const out = [
    "### Summary (c=64)",
    "",
    "Calls/s with the ratio to (b) in parentheses (context, not a target). CPU above (b): the process under test's CPU µs per call minus (b)'s, each over a fixed number of calls (see \"Cost per call\"). Many users: calls/s and p99 under load with the load over the connected users, as ratios to one user, same process, alternating rounds.",
    "",
    "| arm | JSON calls/s | SSE calls/s | CPU µs per call above (b), JSON / SSE | many users: calls/s, JSON / SSE | many users: p99, JSON / SSE | 2,000 long streams: peak RSS (idle) | ledger rows = calls served |",
    "| --- | ---: | ---: | --- | --- | --- | --- | --- |",
  ];
  for (const x of r.arms) {
    if (x.id === "g2" || x.error) continue;
    const rate = (shape: "json" | "sse") => {
      const t = throughputAt(x, shape);
      const base = throughputAt(b, shape);
      return t ? `${int(t.rps)}${base && x.id !== "b" ? ` (${(t.rps / base.rps).toFixed(2)}×)` : ""}` : "–";
    };
    const cost =
      x.id === "b"
        ? `${us(fixedRun(x, "json", "one")?.cpuUsPerCall.sut)} / ${us(fixedRun(x, "sse", "one")?.cpuUsPerCall.sut)} (its own)`
        : x.id === "a"
          ? "–"
          : `${us(aboveBare(r, x.id, "json"))} / ${us(aboveBare(r, x.id, "sse"))}`;
    const many = (pick: "rpsRatio" | "p99Ratio") =>
      x.manyUsers?.length ? `${times(manyUsersRun(x, "json")?.[pick])} / ${times(manyUsersRun(x, "sse")?.[pick])}` : "–";
    const long = x.longStreams.find((l) => l.streams === 2000) ?? x.longStreams.at(-1);
    const rss = long
      ? `${long.peakRssMb.toFixed(1)} MB${long.streams === 2000 ? "" : ` (${int(long.streams)} streams)`} (${(x.idleRssMb ?? NaN).toFixed(1)})`
      : "–";
    const rows = x.rows ? `${int(x.rows.ledgerRows)} = ${int(x.rows.upstreamServed)}${x.rows.lost === 0 ? "" : " **≠**"}` : "–";
    out.push(`| ${x.label} | ${rate("json")} | ${rate("sse")} | ${cost} | ${many("rpsRatio")} | ${many("p99Ratio")} | ${rss} | ${rows} |`);
  }
  out.push("");
  return out;
}

/** Everything but the process under test shares core 0: its sum near 1.00 means core 0, not the arm, set the pace. */
const coreZeroBusy = (f: FixedCallsRun) =>
  Object.entries(f.busy)
    .filter(([name]) => name !== "sut")
    .reduce((sum, [, v]) => sum + v, 0);

export function renderCostPerCall(r: BenchResults): string[] {
  const calls = r.config.fixedCalls as number | undefined;
  const out = [
    `### Cost per call (CPU µs per call, over a fixed number of calls at c=64: ${calls === undefined ? "" : `${int(calls)}, or about ${r.config.seconds as number} s of a slower arm's own rate`})`,
    "",
    'wrk sends the calls and stops (`wrk-post.lua`, BENCH_STOP_AFTER); the calls are counted at the upstream (those wrk cut in flight included), and each process\'s CPU is utime + stime from `/proc/<pid>/stat` (PostgreSQL: its whole process tree) from before the load to after the last call was served plus 0.6 s for the flushes it left. "busy" is the cores each process kept busy during the load: the process under test near 1.00 means the loader (wrk, on core 0 with the upstream and the stores) kept it saturated; below that with core 0 near 1.00, core 0 set the pace (the CPU per call stands either way).',
    "",
    "| arm | shape | users | calls | calls/s | under test | above (b) | upstream | redis-server | PostgreSQL | busy: under test / loader / all of core 0 | rows |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
  ];
  for (const x of r.arms) {
    for (const f of x.fixedCalls ?? []) {
      const above = x.id === "b" ? "–" : us(aboveBare(r, x.id, f.shape, f.users > 1 ? "many" : "one"));
      const c = f.cpuUsPerCall;
      out.push(
        `| ${x.label} | ${f.shape.toUpperCase()} | ${int(f.users)} | ${int(f.calls)} | ${int(f.callsPerSecond)} | ${us(c.sut)} | ${above} | ${us(c.upstream)} | ${us(c.redis)} | ${us(c.postgres)} | ${(f.busy.sut ?? NaN).toFixed(2)} / ${(f.busy.loader ?? NaN).toFixed(2)} / ${coreZeroBusy(f).toFixed(2)} | ${f.rows === null ? "–" : int(f.rows)} |`,
      );
    }
  }
  out.push("");
  return out;
}

export function renderManyUsers(r: BenchResults): string[] {
  const withRuns = r.arms.filter((x) => x.manyUsers?.length);
  if (withRuns.length === 0) return [];
  const out = [
    "### Many users against one user (c=64, same process, alternating rounds)",
    "",
    "Each pair of rounds: one run with every call for one of the connected users (the first) and one with the calls spread round-robin over all of them (each its own budget account, limiter key and ledger rows), each pair in the other order from the last, wrk sending its prepared requests the same way on both sides; first, a warm-up that calls every user once (an account's first call in a process loads it; its rate is the \"first calls\" column). Targets: calls/s ≥ 0.95×, p99 under load ≤ 1.2×. The last column is the share of the service's core the hypervisor took in each run (steal, from `/proc/stat`): a pair of rounds with more than the run's bound on either side (2 % by default) is set aside and another pair run in its place, at most as many again as asked for; the ratios are over the pairs not set aside (over every pair when none was within the bound), and every pair is listed.",
    "",
    "| arm | shape | users (connected in) | first calls: calls/s, p99 (ms) | rounds: many / one calls/s | calls/s ratio | rounds: many / one p99 (ms) | p99 ratio | rounds: many / one core stolen |",
    "| --- | --- | --- | --- | --- | ---: | --- | ---: | --- |",
  ];
  for (const x of withRuns) {
    for (const m of x.manyUsers!) {
      const connected = x.usersConnected ? ` (${x.usersConnected.seconds.toFixed(1)} s)` : "";
      const rps = m.rounds.map((u) => `${int(u.many.rps)} / ${int(u.one.rps)}`).join(", ");
      const p99 = m.rounds.map((u) => `${(u.many.latencyUs.p99 / 1000).toFixed(1)} / ${(u.one.latencyUs.p99 / 1000).toFixed(1)}`).join(", ");
      const first = m.firstCalls ? `${int(m.firstCalls.rps)}, ${(m.firstCalls.latencyUs.p99 / 1000).toFixed(1)}` : "–";
      const steal = stolenPairs(
        m.rounds,
        (u) => [u.many.sutCore, u.one.sutCore],
        (u) => u.setAside === true,
      );
      out.push(
        `| ${x.label} | ${m.shape.toUpperCase()} | ${int(m.users)}${connected} | ${first} | ${rps} | ${times(m.rpsRatio)} | ${p99} | ${times(m.p99Ratio)} | ${steal} |`,
      );
    }
  }
  out.push("");
  return out;
}

/**
 * The operators' sizing table: (g)'s CPU per call of each component, as calls/s one core of
 * each sustains. Over many users when the run had them (production's shape), else one.
 */
export function renderSizing(r: BenchResults): string[] {
  const g = r.arms.find((a) => a.id === "g");
  const spread: "one" | "many" = fixedRun(g, "json", "many") ? "many" : "one";
  const json = fixedRun(g, "json", spread);
  const sse = fixedRun(g, "sse", spread);
  if (!json && !sse) return [];
  const users = json?.users ?? sse?.users ?? 1;
  const perCore = (v: number | undefined) => (v === undefined || !(v > 0) ? "–" : int(1e6 / v));
  const row = (label: string, key: string) =>
    `| ${label} | ${us(json?.cpuUsPerCall[key])} | ${perCore(json?.cpuUsPerCall[key])} | ${us(sse?.cpuUsPerCall[key])} | ${perCore(sse?.cpuUsPerCall[key])} |`;
  return [
    "### Sizing: PostgreSQL + Redis, CPU per call of each component",
    "",
    `Arm (g), ${int(json?.calls ?? sse?.calls ?? 0)} calls per shape at c=64 spread over ${int(users)} user${users === 1 ? "" : "s"}; CPU from \`/proc/<pid>/stat\` (PostgreSQL: the postmaster and every backend). Calls/s per core = 1,000,000 / µs per call: what one core given wholly to that component sustains. Ready to paste into README:`,
    "",
    "| component | CPU µs per call, JSON | calls/s per core, JSON | CPU µs per call, SSE | calls/s per core, SSE |",
    "| --- | ---: | ---: | ---: | ---: |",
    row("the service (one Bun process)", "sut"),
    row("redis-server", "redis"),
    row("PostgreSQL (all its processes)", "postgres"),
    "",
    `For scale, the benchmark's own upstream used ${us(json?.cpuUsPerCall.upstream)} / ${us(sse?.cpuUsPerCall.upstream)} µs per call (JSON / SSE); a real upstream is remote.`,
    "",
  ];
}

export function renderTwoProcesses(r: BenchResults): string[] {
  const g2 = r.arms.find((a) => a.id === "g2");
  if (!g2?.twoProcesses?.length) return [];
  const out = [
    "### Two service processes sharing Redis and PostgreSQL (g2), against one",
    "",
    `Cores of the two processes: ${((r.config.g2Cores as number[] | undefined) ?? [1, 1]).join(" and ")}. By default both on the core one process has (core 1): at equal CPU for the service, what sharing the stores costs (core 0 already carries wrk, the upstream, Redis and PostgreSQL; scaling across cores is the sizing table's). The loader is two wrk processes of c/2 connections in both layouts: both at one process, or one at each. Alternating rounds on the same two processes and database. Target: two ≥ one.`,
    "",
    "| shape | users | rounds: two / one calls/s | per process, two | ratio | p99 under load, two / one (ms) | CPU µs per call, two / one: service, redis-server, PostgreSQL | rounds: two / one core stolen |",
    "| --- | ---: | --- | --- | ---: | --- | --- | --- |",
  ];
  for (const t of g2.twoProcesses) {
    const rounds = t.rounds.map((u) => `${int(u.two.rps)} / ${int(u.one.rps)}`).join(", ");
    const split = t.rounds.map((u) => `${int(u.two.perProcessRps[0])} + ${int(u.two.perProcessRps[1])}`).join(", ");
    const p99 = t.rounds.map((u) => `${(u.two.p99Us / 1000).toFixed(1)} / ${(u.one.p99Us / 1000).toFixed(1)}`).join(", ");
    const last = t.rounds.at(-1);
    const cpu = last ? (["sut", "redis", "postgres"] as const).map((k) => `${us(last.two.cpuUsPerCall[k])} / ${us(last.one.cpuUsPerCall[k])}`).join(", ") : "–";
    const steal = stolenPairs(t.rounds, (u) => [u.two.sutCore, u.one.sutCore]);
    out.push(`| ${t.shape.toUpperCase()} | ${int(t.users)} | ${rounds} | ${split} | ${times(t.rpsRatio)} | ${p99} | ${cpu} (last round) | ${steal} |`);
  }
  if (g2.rows) out.push("", `Ledger: ${int(g2.rows.ledgerRows)} rows for ${int(g2.rows.upstreamServed)} calls served (${int(g2.rows.lost)} lost).`);
  out.push("");
  return out;
}

export interface Target {
  target: string;
  measured: string;
  met: boolean | null;
}

/** Issue 35's targets that these tables measure (the ratios to (b) of earlier issues are context now). */
export function scaleTargets(r: BenchResults): Target[] {
  const arm = (id: ArmId) => r.arms.find((a) => a.id === id);
  const out: Target[] = [];
  for (const id of ["c", "d", "f", "g"] as const) {
    const x = arm(id);
    if (!x) continue;
    for (const shape of ["json", "sse"] as const) {
      const m = manyUsersRun(x, shape);
      const label = `(${id}) ${shape.toUpperCase()}, load over ${m ? int(m.users) : "many"} users against one`;
      out.push({ target: `${label}: calls/s ≥ 0.95×`, measured: times(m?.rpsRatio), met: m ? m.rpsRatio >= 0.95 : null });
      out.push({ target: `${label}: p99 under load ≤ 1.2×`, measured: times(m?.p99Ratio), met: m ? m.p99Ratio <= 1.2 : null });
    }
  }
  for (const [shape, bound] of [
    ["json", 50],
    ["sse", 70],
  ] as const) {
    const v = arm("c") ? aboveBare(r, "c", shape) : undefined;
    out.push({
      target: `(c) CPU per call above (b) ≤ ${bound} µs, ${shape.toUpperCase()}`,
      measured: v === undefined ? "–" : `${us(v)} µs`,
      met: v === undefined ? null : v <= bound,
    });
  }
  const bare = (shape: "json" | "sse") => throughputAt(arm("b"), shape)?.rps;
  for (const shape of ["json", "sse"] as const) {
    const d = throughputAt(arm("d"), shape)?.rps;
    const k = d !== undefined && bare(shape) ? d / bare(shape)! : undefined;
    out.push({ target: `(d) ≥ 0.40× (b) at c=64, ${shape.toUpperCase()}`, measured: times(k), met: k === undefined ? null : k >= 0.4 });
  }
  for (const shape of ["json", "sse"] as const) {
    const m = manyUsersRun(arm("g"), shape);
    const g = m ? m.rounds.reduce((sum, u) => sum + u.many.rps, 0) / m.rounds.length : undefined;
    const k = g !== undefined && bare(shape) ? g / bare(shape)! : undefined;
    out.push({
      target: `(g) ≥ 0.35× (b) at c=64 with the load over many accounts, ${shape.toUpperCase()}`,
      measured: times(k),
      met: k === undefined ? null : k >= 0.35,
    });
  }
  const d = arm("d");
  const a = arm("a");
  for (const [p, bound] of [
    ["p50", 0.3],
    ["p99", 1],
  ] as const) {
    const v = d?.sequential.json?.totalUs[p];
    const base = a?.sequential.json?.totalUs[p];
    const added = v === undefined || base === undefined ? undefined : (v - base) / 1000;
    out.push({
      target: `(d) added ${p} ≤ ${bound} ms, one at a time`,
      measured: added === undefined ? "–" : `${added.toFixed(3)} ms`,
      met: added === undefined ? null : added <= bound,
    });
  }
  const sqlite1000 = r.writer.find((w) => w.accounts === 1000 && w.ids === "v7" && w.prefill === 0);
  out.push({
    target: "usage writer ≥ 150,000 rows/s at 1,000 accounts (SQLite)",
    measured: sqlite1000 ? `${int(sqlite1000.rowsPerSecond)} rows/s` : "–",
    met: sqlite1000 ? sqlite1000.rowsPerSecond >= 150_000 && sqlite1000.lost === 0 : null,
  });
  const g2 = arm("g2");
  for (const t of g2?.twoProcesses ?? []) {
    out.push({ target: `(g2) two processes ≥ one, ${t.shape.toUpperCase()}`, measured: times(t.rpsRatio), met: t.rpsRatio >= 1 });
  }
  if (g2?.rows) {
    out.push({
      target: "(g2) rows written = calls served (0 lost)",
      measured: `${int(g2.rows.ledgerRows)} rows for ${int(g2.rows.upstreamServed)} calls`,
      met: g2.rows.lost === 0 && g2.rows.ledgerRows >= g2.clientCompleted,
    });
  }
  return out;
}
