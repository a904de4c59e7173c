/**
 * Where the time goes: one arm (or a variant of it) under wrk load, measured and profiled.
 *
 *   bun scripts/bench/profile.ts [--arm c|b|d|f|g] [--shape json|sse] [--seconds 10]
 *     [--connections 64] [--entry scripts/bench/variants/….ts] [--variant no-writer,…]
 *     [--profile] [--interval 250] [--perf] [--perf-core] [--strace] [--sequential 2000 [--samples-out F]]
 *     [--env NAME=VALUE]... [--users N] [--ledger-calls N] [--gc-log] [--pg-statements]
 *
 * Starts the lean upstream (core 0) and the arm (core 1), loads it with wrk (core 0) after
 * a 2 s warm-up, and prints one JSON line: requests per second, and CPU microseconds per
 * request of the process under test, in total and per thread, each thread's context
 * switches per request, and the kB per call it had the kernel read from and write to
 * storage (all from /proc). Then stops it with SIGTERM. Options:
 *   --profile  Bun's sampling profiler (`--cpu-prof --cpu-prof-md`), written at exit
 *   --perf     Linux perf over the load window (native and kernel symbols)
 *   --perf-core  the same over every task on the core of the process under test (kernel
 *              workers, interrupts and idle time too)
 *   --perf-postgres  arms f, g: the same for PostgreSQL's processes (its backends' own
 *              functions: where a call's statements spend the server's CPU)
 *   --strace   syscall counts over the load window (slows the process; counts only)
 *   --sequential N  after the load, N requests one at a time (scripts/bench/sequential.ts,
 *              pinned beside wrk): the latency added when nothing queues, in the same JSON line;
 *              --samples-out FILE keeps every one of them (sequential.ts's own option)
 *   --entry    a variant (scripts/bench/variants/) instead of src/index.ts or the bare
 *              forwarder; --variant says which pieces it takes out or adds
 *   --env      set in the arm's environment (repeatable), the service's or the bare
 *              forwarder's, e.g. a runtime setting
 *   --users N  a service arm's load spread round-robin over N connected users (one by
 *              default): each user's budget account and ledger rows are their own
 *   --ledger-calls N  before the users connect, N calls for one user: the ledger and its
 *              per-user index as large as `npm run bench` has them when its many-users
 *              rounds begin (its throughput and cost cells come first: hundreds of thousands of rows)
 *   --gc-log   the process's garbage collections over the load window, from JavaScriptCore's
 *              own log (BUN_JSC_logGC=1, lib/gc-log.ts): how many, their pauses and cycles
 *              per call, the longest pause and cycle, what it allocated per call, and the
 *              heap after the window's last full collection; with --sequential, the same
 *              over the one-at-a-time calls, in their own figures
 *   --pg-statements  arms f, g: the statements PostgreSQL ran over the load window
 *              (pg_stat_statements), per completed call: the round trips a call costs
 * Arm d adds redis-server, arm f a durable PostgreSQL (fsync on) as the only store, arm g
 * both, all on core 0 beside wrk, as in `npm run bench`; "postgres" in the CPU figures is
 * its whole tree.
 * Everything lands in tmp/bench/profiles/.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { connectUser, startBare, startRedis, startService, type RunningArm, type Upstream } from "./lib/arms";
import { startBenchPostgres } from "./lib/postgres";
import { BUN, childEnv, CpuMeter, REPO_ROOT, spawnPinned, SUT_CORE, type Child } from "./lib/proc";
import { CoreTimeMeter } from "./lib/core-time";
import { envFlags } from "./lib/flags";
import { GC_LOG_ENV, readGcWindow } from "./lib/gc-log";
import { runWrk } from "./lib/wrk";
import { BODIES } from "./workload";

/** CPU ticks (user, system) of every thread of `pid`, by thread name. */
function threadCpu(pid: number): Map<string, { user: number; system: number }> {
  const out = new Map<string, { user: number; system: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")).replace(/[0-9]+$/, "#");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const prev = out.get(name) ?? { user: 0, system: 0 };
      out.set(name, { user: prev.user + Number(f[11]), system: prev.system + Number(f[12]) });
    } catch {
      // the thread ended
    }
  }
  return out;
}

/** The number after `key:` in a /proc file of "key: value" lines (0 when it is absent). */
const procNumber = (text: string, key: string) => Number(text.match(new RegExp(`^${key}:\\s+(\\d+)`, "m"))?.[1] ?? 0);

/** Context switches (voluntary, involuntary) of every thread of `pid`, by thread name. */
function threadSwitches(pid: number): Map<string, { voluntary: number; involuntary: number }> {
  const out = new Map<string, { voluntary: number; involuntary: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const status = readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8");
      const name = (status.match(/^Name:\s+(.*)$/m)?.[1] ?? "?").replace(/[0-9]+$/, "#");
      const prev = out.get(name) ?? { voluntary: 0, involuntary: 0 };
      out.set(name, {
        voluntary: prev.voluntary + procNumber(status, "voluntary_ctxt_switches"),
        involuntary: prev.involuntary + procNumber(status, "nonvoluntary_ctxt_switches"),
      });
    } catch {
      // the thread ended
    }
  }
  return out;
}

/**
 * Bytes the process had the kernel read from and write to storage (`/proc/<pid>/io`'s
 * read_bytes and write_bytes: every thread, the maintenance thread's checkpoints included).
 * Writes count when they are made dirty in the page cache, not when they reach the disk.
 */
function storageBytes(pid: number): { read: number; written: number } {
  const io = readFileSync(`/proc/${pid}/io`, "utf8");
  return { read: procNumber(io, "read_bytes"), written: procNumber(io, "write_bytes") };
}

/** Context switches per completed request, per thread name: how often each thread slept and woke. */
function switchesPerRequest(
  before: Map<string, { voluntary: number; involuntary: number }>,
  after: Map<string, { voluntary: number; involuntary: number }>,
  requests: number,
) {
  const out: Record<string, string> = {};
  for (const [name, t] of after) {
    const b = before.get(name) ?? { voluntary: 0, involuntary: 0 };
    const voluntary = (t.voluntary - b.voluntary) / requests;
    const involuntary = (t.involuntary - b.involuntary) / requests;
    if (voluntary + involuntary >= 0.01) out[name] = `${voluntary.toFixed(2)} voluntary + ${involuntary.toFixed(2)} involuntary`;
  }
  return out;
}

/** Microseconds of CPU per completed request, per thread name (10 ms ticks). */
function perRequestByThread(before: Map<string, { user: number; system: number }>, after: Map<string, { user: number; system: number }>, requests: number) {
  const out: Record<string, string> = {};
  for (const [name, t] of after) {
    const b = before.get(name) ?? { user: 0, system: 0 };
    const user = ((t.user - b.user) * 10_000) / requests;
    const system = ((t.system - b.system) * 10_000) / requests;
    if (user + system >= 0.5) out[name] = `${user.toFixed(1)} user + ${system.toFixed(1)} sys`;
  }
  return out;
}
/** The window's collections, per completed call (µs of pause and of cycle, kB allocated), and the longest one's pause and cycle (ms). */
function gcPerCall(gc: ReturnType<typeof readGcWindow>, calls: number) {
  return {
    eden: gc.eden,
    full: gc.full,
    pauseUsPerCall: Number(((gc.pauseMs * 1000) / calls).toFixed(2)),
    cycleUsPerCall: Number(((gc.cycleMs * 1000) / calls).toFixed(2)),
    allocatedKbPerCall: Number((gc.allocatedKb / calls).toFixed(2)),
    longestPauseMs: Number(gc.longestPauseMs.toFixed(2)),
    longestCycleMs: Number(gc.longestCycleMs.toFixed(2)),
    heapAfterFullKb: gc.heapAfterFullKb,
  };
}
const args = process.argv.slice(2);
const opt = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : args[i + 1]!;
};
const armId = opt("arm", "c") as "b" | "c" | "d" | "f" | "g";
const shape = opt("shape", "json") as "json" | "sse";
const seconds = Number(opt("seconds", "10"));
const connections = Number(opt("connections", "64"));
const entry = opt("entry", "");
const profile = args.includes("--profile");
const interval = opt("interval", "250");
/** Pieces to take out (variants/service.ts) or to add (variants/bare-plus.ts). */
const variant = opt("variant", "");
/** Each `--env NAME=VALUE`, and the collections' log with --gc-log, for the arm under test. */
const gcLog = args.includes("--gc-log");
const extraEnv = { ...envFlags(args), ...(gcLog ? GC_LOG_ENV : {}) };
/** --users N: N users connected, and the load spread over them round-robin. */
const userCount = Number(opt("users", "0"));
/** --ledger-calls N: calls for one user before anything else, to grow the ledger. */
const ledgerCalls = Number(opt("ledger-calls", "0"));
/** --samples-out FILE: every one-at-a-time call of --sequential, kept. */
const samplesOut = opt("samples-out", "");

const work = mkdtempSync(join(tmpdir(), "bench-profile-"));
const profDir = join(work, "prof");
const bodyFile = join(work, `${shape}.json`);
writeFileSync(bodyFile, BODIES[shape]);
const children: Child[] = [];
const bunFlags = profile ? ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-interval=${interval}`, `--cpu-prof-dir=${profDir}`] : [];

try {
  const upChild = spawnPinned("upstream", 0, [BUN, "scripts/bench/upstream.ts", "--kind", "lean"], childEnv());
  children.push(upChild);
  const { url } = await upChild.firstJson<{ url: string }>();
  const upstream: Upstream = { url, pid: upChild.pid, requestsServed: async () => 0 };
  // Arm d, and the bare forwarder's `redis` piece (variants/bare-plus.ts), get a redis-server.
  const redis = armId === "d" || armId === "g" || (armId === "b" && variant.split(",").includes("redis")) ? await startRedis(0) : null;
  const countStatements = args.includes("--pg-statements");
  const postgres = armId === "f" || armId === "g" ? await startBenchPostgres(0, { statements: countStatements }) : null;
  let arm: RunningArm;
  if (armId === "b")
    arm = await startBare(upstream, SUT_CORE, bunFlags, entry || undefined, {
      ...(variant ? { BARE_PLUS: variant } : {}),
      ...(redis ? { REDIS_URL: redis.url } : {}),
      ...extraEnv,
    });
  else {
    // Connecting N users is N session mints: their limit lifted like the chat one.
    const env = { ...(variant ? { BENCH_VARIANT: variant } : {}), ...(userCount > 0 ? { RL_SESSIONS_LIMIT: "1000000000" } : {}), ...extraEnv };
    const postgresUrl = postgres ? await postgres.createDatabase("bench_profile") : undefined;
    arm = await startService(armId, { dir: work, databasePath: join(work, "proxy.sqlite"), postgresUrl }, upstream, SUT_CORE, redis?.url ?? null, {
      bunFlags,
      entry: entry || undefined,
      env,
    });
  }

  if (ledgerCalls > 0) await runWrk({ url: arm.url, bodyFile, headers: arm.headers, connections, seconds: 600, core: 0, stopAfter: ledgerCalls });
  const users = userCount > 0 && armId !== "b" ? { count: userCount, prefix: "bench-user-" } : undefined;
  if (users) {
    const base = new URL(arm.url).origin;
    // 32 at a time: 10,000 users one after another take minutes (each is two writes).
    for (let first = 0; first < users.count; first += 32) {
      const batch = Array.from({ length: Math.min(32, users.count - first) }, (_, i) => `${users.prefix}${first + i}`);
      await Promise.all(batch.map((user) => connectUser(base, { authorization: arm.headers.authorization! }, user)));
    }
  }
  // Every user's first call before the warm-up, as `npm run bench` makes them
  // (lib/many-users.ts): a first call loads the user's account, and a 2 s warm-up alone left
  // thousands of them to the measured window.
  if (users) await runWrk({ url: arm.url, bodyFile, headers: arm.headers, connections, seconds: 300, core: 0, users, stopAfter: users.count });
  await runWrk({ url: arm.url, bodyFile, headers: arm.headers, connections, seconds: 2, core: 0, users });
  const meter = new CpuMeter({ sut: arm.pid, upstream: upstream.pid });
  const sutCoreMeter = new CoreTimeMeter(SUT_CORE);
  const postgresCpuBefore = postgres?.cpuSeconds() ?? 0;
  if (postgres && countStatements) await postgres.statementsSinceLast();
  const loadStartedAt = performance.now();
  const threadsBefore = threadCpu(arm.pid);
  const switchesBefore = threadSwitches(arm.pid);
  const storageBefore = storageBytes(arm.pid);
  // Optional: Linux perf over the same window, for the native and kernel side Bun's profiler cannot see.
  const perfFile = join(work, "perf.data");
  // `perf record` of `target` (its -p or -C arguments) into `file`, for the load window.
  const recordPerf = (target: string[], file: string) =>
    Bun.spawn(["perf", "record", "-F", "1999", ...target, "-o", file, "--", "sleep", String(Math.max(1, seconds - 1))], { stdout: "ignore", stderr: "ignore" });
  const perf = args.includes("--perf") ? recordPerf(["-p", String(arm.pid)], perfFile) : null;
  // --perf-core: every task on the SUT core (kernel workers, interrupts, idle too), for time
  // the core spends on the process's behalf that the process is not charged for.
  const perfCoreFile = join(work, "perf-core.data");
  const perfCore = args.includes("--perf-core") ? recordPerf(["-C", String(SUT_CORE)], perfCoreFile) : null;
  const perfPostgresFile = join(work, "perf-postgres.data");
  const perfPostgres = postgres && args.includes("--perf-postgres") ? recordPerf(["-p", postgres.pids().join(",")], perfPostgresFile) : null;
  // Optional: syscall counts over the window (strace slows the process down; only the counts per request mean anything).
  const strace = args.includes("--strace")
    ? Bun.spawn(["timeout", "-s", "INT", String(Math.max(1, seconds - 1)), "strace", "-c", "-f", "-p", String(arm.pid)], { stdout: "pipe", stderr: "pipe" })
    : null;
  // The window's collections are the log lines between two marks put in the output's buffer.
  const GC_FROM = "-- load starts --";
  if (gcLog) arm.lines?.push(GC_FROM);
  const r = await runWrk({ url: arm.url, bodyFile, headers: arm.headers, connections, seconds, core: 0, users });
  // At once: the perf reports below run after the load, on an idle core.
  const sutCore = sutCoreMeter.read();
  // Null when the mark has left the buffer (its last 2,000 lines): a window that cannot be read whole.
  const gcFrom = gcLog && arm.lines ? arm.lines.lastIndexOf(GC_FROM) : -1;
  const gcLines = gcFrom >= 0 ? arm.lines!.slice(gcFrom + 1) : null;
  if (gcLog && !gcLines) console.error("--gc-log: the window's start is no longer in the arm's output buffer; no gc figures");
  if (strace) {
    const text = await new Response(strace.stderr).text();
    const out = resolve(REPO_ROOT, "tmp/bench/profiles");
    mkdirSync(out, { recursive: true });
    const target = join(
      out,
      `strace-${armId}-${shape}${variant ? "-" + variant.replaceAll(",", "+") : ""}${entry ? "-" + entry.split("/").pop()!.replace(/\.ts$/, "") : ""}.txt`,
    );
    writeFileSync(target, `completed requests in the window (whole wrk run): ${r.ok}\n${text}`);
    console.log(`strace: ${target}`);
  }
  for (const [recording, file, who] of [
    [perf, perfFile, ""],
    [perfPostgres, perfPostgresFile, "postgres-"],
    [perfCore, perfCoreFile, "core-"],
  ] as const) {
    if (!recording) continue;
    await recording.exited;
    const report = Bun.spawnSync(["perf", "report", "-i", file, "--stdio", "--no-children", "--sort", "comm,dso,sym", "--percent-limit", "0.7"]);
    const out = resolve(REPO_ROOT, "tmp/bench/profiles");
    mkdirSync(out, { recursive: true });
    const target = join(
      out,
      `perf-${who}${armId}-${shape}${variant ? "-" + variant.replaceAll(",", "+") : ""}${entry ? "-" + entry.split("/").pop()!.replace(/\.ts$/, "") : ""}${userCount > 0 ? `-users${userCount}` : ""}.txt`,
    );
    writeFileSync(target, `completed requests in the window (whole wrk run): ${r.ok}\n${report.stdout.toString()}`);
    // Kept beside its report, for other views of it (`perf report -i … --sort sym`).
    renameSync(file, target.replace(/\.txt$/, ".data"));
    console.log(`perf: ${target}`);
  }
  // Read at once: a settle still under way when wrk stops belongs to a call it counted.
  const statements = postgres && countStatements ? await postgres.statementsSinceLast() : null;
  const cpu: Record<string, number> = meter.read();
  if (postgres) cpu.postgres = (postgres.cpuSeconds() - postgresCpuBefore) / ((performance.now() - loadStartedAt) / 1000);
  const threads = perRequestByThread(threadsBefore, threadCpu(arm.pid), r.ok);
  const switches = switchesPerRequest(switchesBefore, threadSwitches(arm.pid), r.ok);
  const storageAfter = storageBytes(arm.pid);
  const storageKbPerCall = {
    read: Number(((storageAfter.read - storageBefore.read) / 1024 / r.ok).toFixed(2)),
    written: Number(((storageAfter.written - storageBefore.written) / 1024 / r.ok).toFixed(2)),
  };
  const sequentialCount = Number(opt("sequential", "0"));
  let sequential: unknown;
  if (sequentialCount > 0) {
    const sequentialWarmup = Math.ceil(sequentialCount / 10);
    // The warm-up's calls count too, for the collections and the statements alike.
    const sequentialCalls = sequentialCount + sequentialWarmup;
    if (postgres && countStatements) await postgres.statementsSinceLast();
    // With --gc-log, the one-at-a-time calls' collections too: one in a slow call's way is
    // what a tail one at a time is made of, or not.
    const GC_SEQUENTIAL_FROM = "-- one at a time starts --";
    if (gcLog) arm.lines?.push(GC_SEQUENTIAL_FROM);
    const client = spawnPinned(
      "sequential",
      0,
      [
        BUN,
        "scripts/bench/sequential.ts",
        ...["--url", arm.url, "--body-file", bodyFile, "--headers", JSON.stringify(arm.headers)],
        ...["--count", String(sequentialCount), "--warmup", String(sequentialWarmup)],
        ...(samplesOut ? ["--samples-out", resolve(samplesOut)] : []),
      ],
      childEnv(),
    );
    children.push(client);
    sequential = await client.firstJson(120_000);
    const seqFrom = gcLog && arm.lines ? arm.lines.lastIndexOf(GC_SEQUENTIAL_FROM) : -1;
    if (seqFrom >= 0) {
      sequential = { ...(sequential as object), gc: gcPerCall(readGcWindow(arm.lines!.slice(seqFrom + 1)), sequentialCalls) };
    }
    if (postgres && countStatements) {
      const seqStatements = await postgres.statementsSinceLast();
      sequential = {
        ...(sequential as object),
        pgStatementsPerCall: Number((seqStatements.total / sequentialCalls).toFixed(3)),
        pgStatements: seqStatements.byQuery
          .filter((q) => q.calls / sequentialCalls >= 0.01)
          .map((q) => ({ perCall: Number((q.calls / sequentialCalls).toFixed(3)), query: q.query })),
      };
    }
  }
  console.log(
    JSON.stringify({
      arm: armId,
      entry: entry || "src/index.ts",
      variant,
      shape,
      connections,
      rps: Math.round(r.rps),
      errors: r.errors,
      p99Ms: r.latencyUs.p99 / 1000,
      maxMs: r.latencyUs.max / 1000,
      cpu,
      usPerRequestOnSutCore: Math.round((cpu.sut! * 1e6) / r.rps),
      usPerRequestByThread: threads,
      switchesPerRequestByThread: switches,
      storageKbPerCall,
      // The SUT core's time the hypervisor took, and in which nothing ran, over the load window.
      sutCoreShares: sutCore && { stolen: Number(sutCore.stolen.toFixed(3)), idle: Number(sutCore.idle.toFixed(3)) },
      ...(sequential ? { sequential } : {}),
      ...(gcLines ? { gc: gcPerCall(readGcWindow(gcLines), r.ok) } : {}),
      ...(statements
        ? {
            pgStatementsPerCall: Number((statements.total / r.ok).toFixed(3)),
            pgStatements: statements.byQuery
              .filter((q) => q.calls / r.ok >= 0.001)
              .map((q) => ({ perCall: Number((q.calls / r.ok).toFixed(3)), query: q.query })),
          }
        : {}),
    }),
  );
  await arm.stop();
  await redis?.stop();
  await postgres?.stop();
  if (profile) {
    const out = resolve(REPO_ROOT, "tmp/bench/profiles");
    mkdirSync(out, { recursive: true });
    for (const file of readdirSync(profDir)) {
      const target = join(
        out,
        `${armId}-${shape}${entry ? "-" + entry.split("/").pop()!.replace(/\.ts$/, "") : ""}${file.endsWith(".md") ? ".md" : ".cpuprofile"}`,
      );
      renameSync(join(profDir, file), target);
      console.log(`profile: ${target}`);
    }
  }
} finally {
  await Promise.all(children.map((c) => c.stop(5000)));
  rmSync(work, { recursive: true, force: true });
}
process.exit(0);
