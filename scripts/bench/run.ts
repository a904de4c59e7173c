/**
 * `npm run bench`: every arm in one run. Every raw number goes to --out (JSON), and the
 * Markdown tables beside it (the same name ending in .md), from which BENCHMARKS.md's
 * summary is copied: that file stays one page, so a run does not write into it.
 *
 *   bun scripts/bench/run.ts [--seconds 10] [--warmup 3] [--connections 16,64,256]
 *     [--sequential 2000] [--streams 1000,2000] [--arms a,b,c,d,e,f,g,g2] [--upstream lean|mock]
 *     [--users 10000] [--user-rounds 2] [--max-stolen 0.02] [--fixed-calls 50000] [--g2-cores 1,1]
 *     [--wait-quiet 120] [--quick] [--out tmp/bench/results.json]
 *
 * Beside the throughput cells, at c=64 (issue 35):
 *   - cost per call: CPU µs per call of every process over --fixed-calls calls (lib/fixed-calls.ts),
 *     in every arm but (a); a service arm's figure above (b)'s is the cost of the service;
 *   - many users: each service arm with the load spread over --users connected users, against
 *     one user, in --user-rounds alternating rounds (lib/many-users.ts; a pair with more than
 *     --max-stolen of core 1 stolen on either side is set aside and run again), and its cost per call;
 *     (g)'s per-component costs over many users are the sizing table;
 *   - (g2): two service processes sharing Redis and PostgreSQL against one (lib/two-processes.ts).
 *
 * Cores (2 here): the process under test runs alone on core 1; wrk, the other clients,
 * the upstream, redis-server and PostgreSQL (arms f, g: durable, fsync on; the postmaster
 * and its children pinned with `taskset -a -p`) share core 0. Load goes to 127.0.0.1 only;
 * every wrk run and client is bounded in time, and every child is stopped by its pid at the end.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import {
  ARM_LABELS,
  isServiceArm,
  ledgerRows,
  POSTGRES_ARMS,
  postgresLedgerRows,
  REDIS_ARMS,
  startBare,
  startDirect,
  startPortkey,
  startRedis,
  startService,
  type ArmId,
  type RunningArm,
  type RunningRedis,
  type ServiceState,
  type Upstream,
} from "./lib/arms";
import { startBenchPostgres, type BenchPostgres } from "./lib/postgres";
import { describeMachine, loadAverage, waitForQuiet } from "./lib/machine";
import { BUN, CLIENT_CORE, childEnv, CpuMeter, cpuSeconds, memoryMb, REPO_ROOT, resetPeakRss, spawnPinned, SUT_CORE, type Child } from "./lib/proc";
import { renderReport, type ArmResult, type BenchResults, type LongRun, type SequentialResult, type ThroughputRun } from "./lib/report";
import { runWrk, type WrkOptions } from "./lib/wrk";
import { runFixedCalls, type FixedCallsRun } from "./lib/fixed-calls";
import { MAX_STOLEN, manyUsersRounds } from "./lib/many-users";
import { stolenPairs } from "./lib/core-time";
import { twoProcessRounds } from "./lib/two-processes";
import { connectUsers, MANY_USERS_PREFIX } from "./lib/users";
import { BODIES, type Shape } from "./workload";

const args = process.argv.slice(2);
const has = (name: string) => args.includes(`--${name}`);
const opt = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : args[i + 1]!;
};
const quick = has("quick");
const cfg = {
  seconds: Number(opt("seconds", quick ? "2" : "10")),
  warmup: Number(opt("warmup", quick ? "1" : "3")),
  // --quick: the c=64 cells alone (the summary's), and one count of long streams, so that
  // it stays near five minutes with the many-users, cost-per-call and (g2) runs.
  connections: opt("connections", quick ? "64" : "16,64,256")
    .split(",")
    .map(Number),
  sequential: Number(opt("sequential", quick ? "200" : "2000")),
  streams: opt("streams", quick ? "200" : "1000,2000")
    .split(",")
    .map(Number),
  arms: opt("arms", "a,b,c,d,e,f,g,g2").split(",") as ArmId[],
  upstream: opt("upstream", "lean") as "lean" | "mock",
  waitQuiet: Number(opt("wait-quiet", "120")),
  /** Connected users the many-users runs spread their load over (0: no such runs). */
  users: Number(opt("users", "10000")),
  userRounds: Number(opt("user-rounds", quick ? "1" : "2")),
  /** Many users: the steal on either side above which a pair of rounds is set aside (lib/many-users.ts; 1: never). */
  maxStolen: Number(opt("max-stolen", String(MAX_STOLEN))),
  /** (g2): the core of each of its two service processes (lib/two-processes.ts: why 1,1). */
  g2Cores: opt("g2-cores", `${SUT_CORE},${SUT_CORE}`).split(",").map(Number) as [number, number],
  /** Calls in each cost-per-call run, at most; fewer for a slow arm (costPerCall says how many). */
  fixedCalls: Number(opt("fixed-calls", quick ? "10000" : "50000")),
  out: resolve(REPO_ROOT, opt("out", "tmp/bench/results.json")),
};

const log = (line: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}`);
const children: Child[] = [];
let postgres: BenchPostgres | null = null;
const work = mkdtempSync(join(tmpdir(), "bench-"));
const bodyFile = (shape: Shape) => join(work, `${shape}.json`);
for (const shape of ["json", "sse", "long"] as const) writeFileSync(bodyFile(shape), BODIES[shape]);

// A hard bound on the whole run, whatever hangs.
const watchdog = setTimeout(() => {
  log("watchdog: the run took over 60 minutes; stopping");
  void cleanup().then(() => process.exit(1));
}, 60 * 60_000);

async function cleanup(): Promise<void> {
  await Promise.all(children.map((c) => c.stop(5000).catch(() => null)));
  await postgres?.stop().catch(() => null);
  rmSync(work, { recursive: true, force: true });
}
process.on("SIGINT", () => void cleanup().then(() => process.exit(130)));
process.on("SIGTERM", () => void cleanup().then(() => process.exit(143)));

async function startUpstream(kind: "lean" | "mock", core: number): Promise<Upstream> {
  const child = spawnPinned(`upstream-${kind}`, core, [BUN, "scripts/bench/upstream.ts", "--kind", kind], childEnv());
  children.push(child);
  const { url } = await child.firstJson<{ url: string }>();
  const statsUrl = url.replace(/\/api\/v1$/, "/__stats");
  return { url, pid: child.pid, requestsServed: async () => ((await (await fetch(statsUrl)).json()) as { chat: number }).chat };
}

/** A client script pinned to the client core; resolves with the JSON line it prints. */
async function runClient<T>(script: string, flags: string[], timeoutSeconds: number): Promise<T> {
  const child = spawnPinned(
    script,
    CLIENT_CORE,
    [BUN, `scripts/bench/${script}`, ...flags, "--seconds", String(timeoutSeconds)],
    childEnv({ BUN_CONFIG_MAX_HTTP_REQUESTS: "4096" }),
  );
  const code = await Promise.race([child.proc.exited, Bun.sleep((timeoutSeconds + 30) * 1000).then(() => null)]);
  if (code === null) await child.stop(1000);
  await Bun.sleep(50);
  const line = child.lines.find((l) => l.startsWith("{"));
  if (code !== 0 || !line) throw new Error(`${script} failed (${code}):\n${child.lines.slice(-10).join("\n")}`);
  return JSON.parse(line) as T;
}

/** CPU of a process tree (PostgreSQL's postmaster and backends), as CpuMeter measures one process. */
class TreeCpuMeter {
  private readonly t0 = performance.now();
  private readonly start: Map<string, number>;
  constructor(private readonly trees: Record<string, () => number>) {
    this.start = new Map(Object.entries(trees).map(([name, read]) => [name, read()]));
  }
  read(): Record<string, number> {
    const seconds = (performance.now() - this.t0) / 1000;
    return Object.fromEntries(Object.entries(this.trees).map(([name, read]) => [name, (read() - this.start.get(name)!) / seconds]));
  }
}

async function throughput(
  arm: RunningArm,
  upstream: Upstream,
  cpuPids: Record<string, number>,
  cpuTrees: Record<string, () => number>,
  shape: "json" | "sse",
  connections: number,
  seconds: number,
): Promise<ThroughputRun> {
  const rowsBefore = arm.rowsWritten ? await arm.rowsWritten() : null;
  const servedBefore = await upstream.requestsServed();
  const meter = new CpuMeter(cpuPids);
  const treeMeter = new TreeCpuMeter(cpuTrees);
  const wrk = await runWrk({ url: arm.url, bodyFile: bodyFile(shape), headers: arm.headers, connections, seconds, core: CLIENT_CORE });
  const cpu = { ...meter.read(), ...treeMeter.read(), wrk: wrk.wrkCpu };
  await Bun.sleep(400); // one flush interval (100 ms) and then some
  const rowsWritten = arm.rowsWritten && rowsBefore !== null ? (await arm.rowsWritten()) - rowsBefore : null;
  const upstreamServed = (await upstream.requestsServed()) - servedBefore;
  await Bun.sleep(300);
  return { shape, ...wrk, cpu, rowsWritten, upstreamServed };
}

/**
 * How many calls an arm's cost-per-call run makes: cfg.fixedCalls, or about --seconds of
 * the arm's own rate at c=64 (`rps`, same shape and users) when that is fewer (Portkey's
 * 900 calls/s would otherwise take a minute); never under 1,000, so that one 10 ms CPU
 * tick stays within 10 µs per call.
 */
function fixedCallsFor(rps: number | undefined): number {
  return rps === undefined ? cfg.fixedCalls : Math.max(1000, Math.min(cfg.fixedCalls, Math.round(rps * cfg.seconds)));
}

/** CPU per call of every metered process over `calls` calls at c=64. */
async function costPerCall(
  arm: RunningArm,
  upstream: Upstream,
  cpuPids: Record<string, number>,
  cpuTrees: Record<string, () => number>,
  shape: "json" | "sse",
  calls: number,
  users?: WrkOptions["users"],
): Promise<FixedCallsRun> {
  const run = await runFixedCalls({
    wrk: { url: arm.url, bodyFile: bodyFile(shape), headers: arm.headers, connections: 64, core: CLIENT_CORE, users },
    shape,
    calls,
    maxSeconds: 300,
    served: upstream.requestsServed,
    pids: cpuPids,
    trees: cpuTrees,
    rows: arm.rowsWritten,
  });
  const figures = Object.entries(run.cpuUsPerCall).map(([k, v]) => `${k} ${v.toFixed(1)}`);
  log(
    `${arm.id} cost per call, ${shape}, ${run.users} user(s): ${run.calls} calls in ${run.seconds.toFixed(1)} s; CPU µs per call: ${figures.join(", ")}; busy ${JSON.stringify(Object.fromEntries(Object.entries(run.busy).map(([k, v]) => [k, Math.round(v * 100) / 100])))}`,
  );
  return run;
}

/** The service arm with its load over cfg.users users against one user, and its cost per call so. */
async function manyUsers(
  arm: RunningArm,
  upstream: Upstream,
  state: ServiceState,
  cpuPids: Record<string, number>,
  cpuTrees: Record<string, () => number>,
  result: ArmResult,
) {
  const users = { count: cfg.users, prefix: MANY_USERS_PREFIX };
  if ((state.usersConnected ?? 0) < cfg.users) {
    const connected = await connectUsers(new URL(arm.url).origin, { authorization: arm.headers.authorization! }, cfg.users, users.prefix);
    state.usersConnected = cfg.users;
    result.usersConnected = connected;
    log(`${arm.id}: ${connected.users} users connected in ${connected.seconds.toFixed(1)} s`);
  }
  for (const shape of ["json", "sse"] as const) {
    const run = await manyUsersRounds({
      wrk: { url: arm.url, bodyFile: bodyFile(shape), headers: arm.headers, connections: 64, core: CLIENT_CORE },
      shape,
      users,
      rounds: cfg.userRounds,
      seconds: cfg.seconds,
      sutCore: SUT_CORE,
      maxStolen: cfg.maxStolen,
    });
    result.manyUsers!.push(run);
    result.clientCompleted += run.completed;
    log(
      `${arm.id} ${shape} ${cfg.users} users against 1: calls/s ${run.rpsRatio.toFixed(2)}×, p99 ${run.p99Ratio.toFixed(2)}× ` +
        `(${run.rounds.map((r) => `${Math.round(r.many.rps)}/${Math.round(r.one.rps)}`).join(", ")}); ` +
        `core ${SUT_CORE} stolen, many / one: ${stolenPairs(
          run.rounds,
          (r) => [r.many.sutCore, r.one.sutCore],
          (r) => r.setAside === true,
        )}; ` +
        `calls/s over the time not stolen ${run.rpsRatioUnstolen?.toFixed(2) ?? "unknown"}×`,
    );
    const manyRps = run.rounds.reduce((sum, r) => sum + r.many.rps, 0) / run.rounds.length;
    const cost = await costPerCall(arm, upstream, cpuPids, cpuTrees, shape, fixedCallsFor(manyRps), users);
    result.fixedCalls!.push(cost);
    result.clientCompleted += cost.completedAtLoader;
  }
}

async function longStreams(arm: RunningArm, n: number): Promise<LongRun> {
  const before = memoryMb(arm.pid);
  const reset = resetPeakRss(arm.pid);
  let sampledPeak = before.rss;
  const sampler = setInterval(() => (sampledPeak = Math.max(sampledPeak, memoryMb(arm.pid).rss)), 50);
  const headers = JSON.stringify(arm.headers);
  try {
    const client = await runClient<LongRun["client"]>(
      "long-streams.ts",
      ["--url", arm.url, "--body-file", bodyFile("long"), "--headers", headers, "--streams", String(n)],
      60,
    );
    const after = memoryMb(arm.pid);
    return {
      streams: n,
      rssBeforeMb: before.rss,
      peakRssMb: reset ? Math.max(after.hwm, sampledPeak) : sampledPeak,
      peakFrom: reset ? "VmHWM" : "VmRSS samples",
      client,
    };
  } finally {
    clearInterval(sampler);
  }
}

/** The service arm's ledger: the SQLite file, or its PostgreSQL database. */
async function ledger(state: ServiceState): Promise<{ total: number; byStatus: Record<string, number>; totalsRequestCount?: number }> {
  return state.postgresUrl ? postgresLedgerRows(state.postgresUrl) : ledgerRows(state.databasePath);
}

async function benchArm(id: ArmId, upstream: Upstream, redis: RunningRedis | null, state: ServiceState | null): Promise<ArmResult> {
  const usesRedis = REDIS_ARMS.includes(id);
  const usesPostgres = POSTGRES_ARMS.includes(id);
  const start = async (): Promise<RunningArm> => {
    if (id === "a") return startDirect(upstream, SUT_CORE, CLIENT_CORE);
    if (id === "b") return startBare(upstream, SUT_CORE);
    if (id === "e") return startPortkey(upstream, SUT_CORE);
    if (!isServiceArm(id)) throw new Error(`unknown arm ${id}`);
    return startService(id, state!, upstream, SUT_CORE, usesRedis ? redis!.url : null);
  };
  const result: ArmResult = {
    id,
    label: ARM_LABELS[id],
    throughput: [],
    sequential: {},
    longStreams: [],
    rows: null,
    clientCompleted: 0,
    fixedCalls: [],
    manyUsers: [],
  };
  const ledgerBefore = state ? (await ledger(state)).total : 0;
  const servedBefore = await upstream.requestsServed();

  log(`${ARM_LABELS[id]}: starting`);
  let arm = await start();
  const cpuPids: Record<string, number> = { sut: arm.pid, ...(id === "a" ? {} : { upstream: upstream.pid }), ...(usesRedis ? { redis: redis!.pid } : {}) };
  const cpuTrees: Record<string, () => number> = usesPostgres ? { postgres: () => postgres!.cpuSeconds() } : {};
  try {
    for (const shape of ["json", "sse"] as const) {
      const warm = await runWrk({ url: arm.url, bodyFile: bodyFile(shape), headers: arm.headers, connections: 64, seconds: cfg.warmup, core: CLIENT_CORE });
      result.clientCompleted += warm.ok;
    }
    for (const shape of ["json", "sse"] as const) {
      for (const c of cfg.connections) {
        const run = await throughput(arm, upstream, cpuPids, cpuTrees, shape, c, cfg.seconds);
        result.clientCompleted += run.ok;
        result.throughput.push(run);
        log(
          `${id} ${shape} c=${c}: ${Math.round(run.rps)} req/s, p99 ${(run.latencyUs.p99 / 1000).toFixed(1)} ms, errors ${run.errors}, cpu ${JSON.stringify(Object.fromEntries(Object.entries(run.cpu).map(([k, v]) => [k, Math.round(v * 100) / 100])))}`,
        );
      }
    }
    if (id !== "a") {
      for (const shape of ["json", "sse"] as const) {
        const rps = result.throughput.find((t) => t.shape === shape && t.connections === 64)?.rps;
        result.fixedCalls!.push(await costPerCall(arm, upstream, cpuPids, cpuTrees, shape, fixedCallsFor(rps)));
      }
    }
    result.clientCompleted += result.fixedCalls!.reduce((sum, r) => sum + r.completedAtLoader, 0);
    if (state && cfg.users > 0) await manyUsers(arm, upstream, state, cpuPids, cpuTrees, result);
    for (const shape of ["json", "sse"] as const) {
      const seq = await runClient<SequentialResult>(
        "sequential.ts",
        [
          "--url",
          arm.url,
          "--body-file",
          bodyFile(shape),
          "--headers",
          JSON.stringify(arm.headers),
          "--count",
          String(cfg.sequential),
          "--warmup",
          String(Math.ceil(cfg.sequential / 10)),
        ],
        120,
      );
      result.sequential[shape] = seq;
      result.clientCompleted += seq.requests + Math.ceil(cfg.sequential / 10);
      log(`${id} sequential ${shape}: p50 ${seq.totalUs.p50} us, p99 ${seq.totalUs.p99} us, first byte p50 ${seq.firstByteUs.p50} us`);
    }
    if (id !== "a") {
      // A fresh process for each count, so each peak is those streams' alone (a heap
      // grown by earlier runs is not handed back to the OS).
      for (const n of cfg.streams) {
        await arm.stop();
        arm = await start();
        await Bun.sleep(500);
        result.idleRssMb ??= memoryMb(arm.pid).rss;
        const run = await longStreams(arm, n);
        result.longStreams.push(run);
        result.clientCompleted += run.client.completed;
        log(
          `${id} ${n} long streams: peak RSS ${run.peakRssMb.toFixed(1)} MB (idle ${run.rssBeforeMb.toFixed(1)}), completed ${run.client.completed}, failures ${JSON.stringify(run.client.failures)}`,
        );
      }
    }
  } finally {
    await arm.stop();
  }
  if (state) {
    const served = (await upstream.requestsServed()) - servedBefore;
    const after = await ledger(state);
    const rows = after.total - ledgerBefore;
    result.rows = {
      upstreamServed: served,
      ledgerRows: rows,
      lost: served - rows,
      byStatus: after.byStatus,
      ...(after.totalsRequestCount === undefined ? {} : { totalsRequestCount: after.totalsRequestCount }),
    };
    const totals = after.totalsRequestCount === undefined ? "" : `, usage_totals.request_count ${after.totalsRequestCount}`;
    log(`${id} rows: ${rows} in the ledger${totals}, ${served} served upstream, ${result.clientCompleted} completed at the clients`);
  }
  return result;
}

/**
 * (g2): two service processes on one PostgreSQL database and one Redis, against one of them
 * (lib/two-processes.ts says why both run on the SUT core), and their ledger against the
 * calls served.
 */
async function benchTwoProcesses(upstream: Upstream, redis: RunningRedis, dbDir: string): Promise<ArmResult> {
  const state: ServiceState = { dir: dbDir, databasePath: "", postgresUrl: await postgres!.createDatabase("bench_g2") };
  const result: ArmResult = {
    id: "g2",
    label: ARM_LABELS.g2,
    throughput: [],
    sequential: {},
    longStreams: [],
    rows: null,
    clientCompleted: 0,
    twoProcesses: [],
  };
  const servedBefore = await upstream.requestsServed();
  log(`${ARM_LABELS.g2}: starting`);
  const processes: RunningArm[] = [];
  try {
    // One after the other: the first creates the app and migrates; the second finds them.
    for (const core of cfg.g2Cores) processes.push(await startService("g", state, upstream, core, redis.url));
    const [first, second] = processes as [RunningArm, RunningArm];
    const users = cfg.users > 0 ? { count: cfg.users, prefix: MANY_USERS_PREFIX } : undefined;
    if (users) {
      result.usersConnected = await connectUsers(new URL(first.url).origin, { authorization: first.headers.authorization! }, users.count, users.prefix);
      log(`g2: ${users.count} users connected in ${result.usersConnected.seconds.toFixed(1)} s`);
    }
    for (const shape of ["json", "sse"] as const) {
      const run = await twoProcessRounds({
        urls: [first.url, second.url],
        load: { bodyFile: bodyFile(shape), headers: first.headers, core: CLIENT_CORE, users },
        shape,
        connections: 64,
        rounds: cfg.userRounds,
        seconds: cfg.seconds,
        warmupSeconds: cfg.warmup,
        meters: {
          cpu: () => ({
            sut: cpuSeconds(first.pid) + cpuSeconds(second.pid),
            redis: cpuSeconds(redis.pid),
            postgres: postgres!.cpuSeconds(),
          }),
          served: upstream.requestsServed,
        },
        // Steal is read for one core only: the default, both processes on the service's core.
        sutCore: cfg.g2Cores[0] === cfg.g2Cores[1] ? cfg.g2Cores[0] : null,
      });
      result.twoProcesses!.push(run);
      result.clientCompleted += run.completed;
      log(
        `g2 ${shape}: two processes against one, calls/s ${run.rpsRatio.toFixed(2)}× (${run.rounds.map((r) => `${Math.round(r.two.rps)}/${Math.round(r.one.rps)}`).join(", ")}); ` +
          `core stolen, two / one: ${stolenPairs(run.rounds, (r) => [r.two.sutCore, r.one.sutCore])}`,
      );
    }
    // Calls wrk cut in flight are settled by the reconciler from the upstream's records,
    // after a backoff: the processes stay up until every served call has its row (or 30 s),
    // as the other arms' do through their later runs.
    const deadline = performance.now() + 30_000;
    while (performance.now() < deadline && (await ledger(state)).total < (await upstream.requestsServed()) - servedBefore) await Bun.sleep(500);
  } finally {
    for (const p of processes) await p.stop();
    // A row missing has a reason in a log (LOG_LEVEL=warn): show it beside the count.
    for (const p of processes)
      for (const line of (p.lines ?? []).filter((l) => /"level":"(warn|error)"/.test(l)).slice(-20)) log(`g2 ${p.pid}: ${line.slice(0, 400)}`);
  }
  const served = (await upstream.requestsServed()) - servedBefore;
  const after = await ledger(state);
  result.rows = {
    upstreamServed: served,
    ledgerRows: after.total,
    lost: served - after.total,
    byStatus: after.byStatus,
    totalsRequestCount: after.totalsRequestCount,
  };
  log(`g2 rows: ${after.total} in the ledger, ${served} served upstream, ${result.clientCompleted} completed at the clients`);
  return result;
}

async function main(): Promise<void> {
  const machine = describeMachine();
  log(`machine: ${machine.cpus} cpus, ${machine.cpuModel}, ${machine.memoryGb} GB; bun ${machine.bun}`);
  const quiet = await waitForQuiet(cfg.waitQuiet, log);
  const startedAt = new Date().toISOString();
  const loadAtStart = loadAverage();

  log("usage-writer micro-benchmark");
  const writer = [];
  // An empty ledger, many accounts, and a ledger that already holds a million rows, with
  // the service's time-ordered (v7) request ids, and random ones (as before) for comparison.
  const prefill = quick ? "100000" : "1000000";
  const writerRuns = [
    ["--accounts", "1"],
    ["--accounts", "1000"],
    ["--accounts", "1", "--prefill", prefill],
    ["--accounts", "1", "--prefill", prefill, "--ids", "random"],
  ];
  for (const flags of writerRuns) {
    const child = spawnPinned("usage-writer", SUT_CORE, [BUN, "scripts/bench/usage-writer.ts", "--rows", quick ? "20000" : "100000", ...flags], childEnv());
    await child.proc.exited;
    await Bun.sleep(50);
    writer.push(JSON.parse(child.lines.find((l) => l.startsWith("{"))!));
  }

  const upstreamCheck: BenchResults["upstreamCheck"] = [];
  if (cfg.upstream === "lean") {
    // How fast the src mock itself is, on the SUT core, next to the lean replay.
    const mock = await startUpstream("mock", SUT_CORE);
    for (const shape of ["json", "sse"] as const) {
      const r = await runWrk({
        url: `${mock.url}/chat/completions`,
        bodyFile: bodyFile(shape),
        headers: { authorization: "Bearer bench" },
        connections: 64,
        seconds: cfg.seconds,
        core: CLIENT_CORE,
      });
      upstreamCheck.push({ upstream: "packages/mock-upstream/src", shape, rps: r.rps, errors: r.errors });
    }
    await children.pop()!.stop();
  }

  const upstream = await startUpstream(cfg.upstream, CLIENT_CORE);
  const needsRedis = cfg.arms.some((id) => REDIS_ARMS.includes(id));
  const redis = needsRedis ? await startRedis(CLIENT_CORE) : null;
  if (cfg.arms.some((id) => POSTGRES_ARMS.includes(id))) {
    postgres = await startBenchPostgres(CLIENT_CORE);
    log(`PostgreSQL ${postgres.version} (fsync on) on port ${postgres.pg.port}, pinned to core ${CLIENT_CORE}`);
  }
  const dbDir = mkdtempSync(join(tmpdir(), "bench-db-"));
  const arms: ArmResult[] = [];
  try {
    for (const id of cfg.arms) {
      // Each service arm its own database: the SQLite file, or a fresh Postgres database.
      const state: ServiceState | null = !isServiceArm(id)
        ? null
        : POSTGRES_ARMS.includes(id)
          ? { dir: dbDir, databasePath: "", postgresUrl: await postgres!.createDatabase(`bench_${id}`) }
          : { dir: dbDir, databasePath: join(dbDir, `${id}.sqlite`) };
      try {
        arms.push(id === "g2" ? await benchTwoProcesses(upstream, redis!, dbDir) : await benchArm(id, upstream, redis, state));
      } catch (err) {
        log(`${id} failed: ${err instanceof Error ? err.stack : String(err)}`);
        arms.push({ id, label: ARM_LABELS[id], throughput: [], sequential: {}, longStreams: [], rows: null, clientCompleted: 0, error: String(err) });
      }
    }
  } finally {
    await redis?.stop();
    await postgres?.stop();
    rmSync(dbDir, { recursive: true, force: true });
  }

  const results: BenchResults = {
    startedAt,
    finishedAt: new Date().toISOString(),
    machine,
    quiet,
    loadAtStart,
    loadAtEnd: loadAverage(),
    config: { ...cfg, out: undefined },
    cores: { client: CLIENT_CORE, sut: SUT_CORE },
    writer,
    upstreamCheck,
    arms,
  };
  mkdirSync(dirname(cfg.out), { recursive: true });
  writeFileSync(cfg.out, JSON.stringify(results, null, 2));
  const tables = cfg.out.replace(/\.json$/, "") + ".md";
  renderReport(results, tables);
  log(`results: ${cfg.out}, tables: ${tables}`);
}

try {
  await main();
} finally {
  clearTimeout(watchdog);
  await cleanup();
}
process.exit(0);
