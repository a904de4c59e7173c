/**
 * `npm run soak`: a steady mixed load on the proxy in Redis mode for a fixed time, then the
 * checks of issue 7: no error beyond the expected 402/429, RSS flat, WAL bounded, ledger
 * rows equal to completed requests (and the money in SQLite and Redis agreeing).
 *
 *   bun scripts/soak.ts [--minutes 10] [--rate 150] [--users 200] [--max-inflight 1500]
 *     [--sample-seconds 10] [--seed 7] [--out tmp/soak/results.json] [--keep]
 *     [--proxy-env KEY=VALUE,KEY=VALUE]   (extra proxy settings, e.g. to soak another configuration)
 *
 * Not part of `bun test` (the name matches no test pattern). Traffic goes to 127.0.0.1
 * only; every request is bounded by a timeout, the whole run by a watchdog, and every
 * child is stopped by its own pid. Exits 1 when a check fails.
 */
import { existsSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import Redis from "ioredis";
import { describeMachine, loadAverage, otherTestRuns } from "./bench/lib/machine";
import { flagReader } from "./bench/lib/flags";
import { REPO_ROOT } from "./bench/lib/proc";
import { drive, Tally } from "./soak/driver";
import { checkLedger, readRedisBudgets, type Check } from "./soak/ledger-check";
import { renderMarkdown, rssVerdict, walCheck, type SoakSummary } from "./soak/report";
import { formatSample, readHealth, Sampler } from "./soak/sampler";
import { connectUsers, startSoakStack, type SoakStack } from "./soak/stack";
import { seededRandom } from "./lib/seeded-random";
import { chatLimitFor, soakUsers } from "./soak/workload";

const flag = flagReader();
const has = (name: string) => process.argv.includes(`--${name}`);
const cfg = {
  minutes: Number(flag("minutes", "10")),
  rate: Number(flag("rate", "150")),
  users: Number(flag("users", "200")),
  maxInFlight: Number(flag("max-inflight", "1500")),
  sampleSeconds: Number(flag("sample-seconds", "10")),
  seed: Number(flag("seed", "7")),
  out: resolve(REPO_ROOT, flag("out", "tmp/soak/results.json")),
  keep: has("keep"),
  proxyEnv: Object.fromEntries(
    flag("proxy-env", "")
      .split(",")
      .filter((kv) => kv.includes("="))
      .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
  ) as Record<string, string>,
  /** Long enough for the 33 s quiet streams, short enough to end the run. */
  requestTimeoutMs: 90_000,
  rlChatWindowSeconds: 60,
};
const command = `npm run soak -- ${process.argv.slice(2).join(" ")}`.trim();

const log = (line: string) => console.error(`[soak ${new Date().toISOString().slice(11, 19)}] ${line}`);
const fail = (message: string): never => {
  log(message);
  throw new Error(message);
};

let stack: SoakStack | null = null;
let redisClient: Redis | null = null;
async function cleanup(): Promise<void> {
  redisClient?.disconnect();
  await stack?.cleanup(cfg.keep).catch((err) => log(`cleanup: ${String(err)}`));
}

// A hard bound on the whole run, whatever hangs: the load, plus five minutes.
const watchdog = setTimeout(
  () => {
    log("watchdog: the run is overdue; stopping everything");
    void cleanup().then(() => process.exit(1));
  },
  (cfg.minutes + 5) * 60_000,
);
process.on("SIGINT", () => void cleanup().then(() => process.exit(130)));
process.on("SIGTERM", () => void cleanup().then(() => process.exit(143)));

async function main(): Promise<boolean> {
  const startedAt = new Date().toISOString();
  const loadAtStart = loadAverage();
  const testsAtStart = otherTestRuns();
  const users = soakUsers(cfg.users);
  const rlChatLimit = chatLimitFor(users, cfg.rate, cfg.rlChatWindowSeconds);
  const proxyEnv = {
    RL_CHAT_LIMIT: String(rlChatLimit),
    RL_CHAT_WINDOW_SECONDS: String(cfg.rlChatWindowSeconds),
    // Connecting the users mints one session each.
    RL_SESSIONS_LIMIT: String(cfg.users * 2),
    ...cfg.proxyEnv,
  };
  log(`starting: redis-server, mock upstream, proxy (${JSON.stringify(proxyEnv)}); ${cfg.users} users`);
  stack = await startSoakStack(proxyEnv);
  const s = stack;
  redisClient = new Redis(s.redis.url, { maxRetriesPerRequest: 1 });
  await connectUsers(s.proxy.baseUrl, s.auth, users);
  log(`proxy pid ${s.proxy.pid}, db ${s.databasePath}; load: ${cfg.rate} requests/s for ${cfg.minutes} min, sample every ${cfg.sampleSeconds} s`);

  const tally = new Tally();
  const t0 = performance.now();
  const sampler = new Sampler(s.proxy.pid, s.databasePath, s.proxy.baseUrl, redisClient, tally, t0);
  let proxyDied = false;
  let stopping = false;
  void s.proxy.exited.then((code) => {
    if (stopping) return;
    proxyDied = true;
    log(`the proxy exited during the run with ${code}`);
  });
  const sampling = setInterval(() => void sampler.take().then((sample) => log(formatSample(sample))), cfg.sampleSeconds * 1000);
  const seconds = cfg.minutes * 60;
  await drive(
    {
      url: `${s.proxy.baseUrl}/api/v1/chat/completions`,
      auth: s.auth,
      users,
      rate: cfg.rate,
      seconds,
      maxInFlight: cfg.maxInFlight,
      requestTimeoutMs: cfg.requestTimeoutMs,
      rand: seededRandom(cfg.seed),
    },
    tally,
  );
  clearInterval(sampling);
  log(`load stopped after ${((performance.now() - t0) / 1000).toFixed(1)} s; every request has ended; waiting for the proxy to settle`);
  if (proxyDied) fail("the proxy died during the run");

  // Settle: no stream still metered, no row queued, every upstream response ended. Bounded.
  const settleDeadline = Date.now() + 60_000;
  for (;;) {
    const health = await readHealth(s.proxy.baseUrl);
    s.served.sweep();
    if (health && health.activeStreams === 0 && health.writer.pending === 0 && s.served.openCount === 0) break;
    if (Date.now() > settleDeadline) {
      log(`not settled within 60 s: ${JSON.stringify(health)}, ${s.served.openCount} upstream responses open; checking anyway`);
      break;
    }
    await Bun.sleep(200);
  }
  const last = await sampler.take();
  log(`settled: ${formatSample(last)}`);

  log("SIGTERM to the proxy");
  stopping = true;
  const proxyExitCode = await s.proxy.stop(60_000);
  const redisBudgets = await readRedisBudgets(redisClient);
  redisClient.disconnect();
  redisClient = null;
  s.served.stop();

  const { checks, facts } = checkLedger(s.databasePath, tally, s.served, redisBudgets);
  const rss = rssVerdict(sampler.samples, seconds, cfg.sampleSeconds);
  const underLoad = sampler.samples.filter((x) => x.t <= seconds + cfg.sampleSeconds / 2).map((x) => x.cpu);
  const wal = walCheck(sampler.samples, facts);
  const walFile = `${s.databasePath}-wal`;
  const all: Check[] = [
    {
      name: "no errors",
      ok: tally.errorCount === 0,
      detail: `${tally.errorCount} (${[...tally.errors.entries()].map(([k, v]) => `${v}× ${k}`).join(", ") || "none"})`,
    },
    {
      name: "402s and 429s both seen",
      ok: (tally.byStatus.get("402") ?? 0) > 0 && (tally.byStatus.get("429") ?? 0) > 0,
      detail: `402: ${tally.byStatus.get("402") ?? 0}, 429: ${tally.byStatus.get("429") ?? 0}`,
    },
    { name: "proxy exits 0 on SIGTERM", ok: proxyExitCode === 0, detail: `exit code ${proxyExitCode}` },
    {
      name: "no error log lines",
      ok: s.proxy.logs.error === 0 && s.proxy.logs.stderr === 0,
      detail: `${s.proxy.logs.error} error, ${s.proxy.logs.warn} warn, ${s.proxy.logs.stderr} stderr lines`,
    },
    {
      name: "limiter never degraded, budgets always up",
      ok: sampler.samples.every((x) => x.limiterDegraded === false && x.budgetOk === true),
      detail: `${sampler.samples.length} samples of /healthz`,
    },
    ...checks,
    rss.check,
    wal.check,
  ];
  const redisSamples = sampler.samples.filter((x) => x.redisUsedBytes !== null);
  const summary: SoakSummary = {
    command,
    startedAt,
    finishedAt: new Date().toISOString(),
    machine: describeMachine(),
    loadAverage: { start: loadAtStart, end: loadAverage() },
    otherTestRuns: { start: testsAtStart, end: otherTestRuns() },
    config: { ...cfg, rlChatLimit, users: cfg.users },
    tally,
    facts,
    rss: rss.verdict,
    proxyCpu: { mean: underLoad.reduce((a, v) => a + v, 0) / underLoad.length, max: Math.max(...underLoad) },
    wal: { maxBytes: wal.maxBytes, boundBytes: wal.boundBytes, afterExitBytes: existsSync(walFile) ? statSync(walFile).size : 0 },
    dbBytes: statSync(s.databasePath).size,
    redis: {
      firstBytes: redisSamples[0]?.redisUsedBytes ?? null,
      lastBytes: redisSamples[redisSamples.length - 1]?.redisUsedBytes ?? null,
      maxKeys: Math.max(...sampler.samples.map((x) => x.redisKeys ?? 0)),
    },
    proxyExitCode,
    logs: s.proxy.logs,
    checks: all,
  };

  const markdown = renderMarkdown(summary);
  console.log(markdown);
  if (tally.errorExamples.length > 0) log(`error examples:\n  ${tally.errorExamples.join("\n  ")}`);
  if (s.proxy.logs.examples.length > 0) log(`proxy log examples:\n  ${s.proxy.logs.examples.join("\n  ")}`);
  mkdirSync(dirname(cfg.out), { recursive: true });
  const { all: latencies, window: _w, completed: _c, refused: _r, ...counts } = tally;
  writeFileSync(
    cfg.out,
    JSON.stringify(
      {
        ...summary,
        tally: {
          ...counts,
          byStatus: Object.fromEntries(tally.byStatus),
          errors: Object.fromEntries(tally.errors),
          latencyCounts: { json: latencies.json.length, sseFirstByte: latencies.sseFirstByte.length, refused: latencies.refused.length },
        },
        samples: sampler.samples,
        markdown,
      },
      null,
      2,
    ),
  );
  log(`results: ${cfg.out}${cfg.keep ? `; kept ${s.dir}` : ""}`);
  const failed = all.filter((c) => !c.ok);
  log(failed.length === 0 ? "all checks passed" : `FAILED: ${failed.map((c) => c.name).join(", ")}`);
  return failed.length === 0;
}

let ok = false;
try {
  ok = await main();
} catch (err) {
  log(`soak aborted: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  // Assigned inside main(), which TypeScript's flow analysis does not see.
  const started = stack as SoakStack | null;
  if (started) log(`proxy output (last lines):\n${started.proxy.tail.slice(-20).join("\n")}`);
} finally {
  clearTimeout(watchdog);
  await cleanup();
}
process.exit(ok ? 0 : 1);
