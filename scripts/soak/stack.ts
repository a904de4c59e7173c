/**
 * The deployment the soak runs against, all on 127.0.0.1: a real redis-server, the mock
 * upstream served over HTTP in this process, and the proxy as its own process
 * (the bundle, as `npm start` runs it) with REDIS_URL, METRICS_TOKEN (for /healthz's counters), a temp SQLite file and the default USAGE_FLUSH_MS,
 * plus one app made with the operator CLI and the soak's users connected over HTTP.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { startMockUpstream, type RunningMockUpstream } from "../../packages/mock-upstream/src";
import { startRedis, type RunningRedis } from "../bench/lib/arms";
import { BUN, childEnv, freePort, REPO_ROOT } from "../bench/lib/proc";
import { readLines } from "../lib/read-lines";
import { RUNTIME_ENV } from "../runtime-env";
import { bundleService, SERVER_BUNDLE_DIR } from "../bundle";
import { ServedTracker } from "./served";
import type { SoakUser } from "./workload";

export interface ProxyLogCounts {
  warn: number;
  error: number;
  /** The first few warn/error lines, as printed. */
  examples: string[];
  /** Lines on stderr (Bun prints crashes and unhandled rejections there). */
  stderr: number;
}

export interface SoakProxy {
  pid: number;
  baseUrl: string;
  logs: ProxyLogCounts;
  /** The last lines it printed (bounded), for a failure message. */
  tail: string[];
  exited: Promise<number>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code (null when killed). */
  stop(graceMs: number): Promise<number | null>;
}

export interface SoakStack {
  dir: string;
  databasePath: string;
  redis: RunningRedis;
  upstream: RunningMockUpstream;
  served: ServedTracker;
  proxy: SoakProxy;
  auth: Record<string, string>;
  /** Stops whatever is still running and deletes the temp dir (unless kept). */
  cleanup(keepDir: boolean): Promise<void>;
}

export async function startSoakStack(proxyEnv: Record<string, string>): Promise<SoakStack> {
  const dir = mkdtempSync(join(tmpdir(), "soak-"));
  const databasePath = join(dir, "proxy.sqlite");
  const databaseUrl = `sqlite:${databasePath}`;
  const redis = await startRedis(null);
  // recordServed keeps every request's entry; ServedTracker moves finished ones into a
  // compact map every second, so memory stays small over ten minutes.
  const upstream = await startMockUpstream({ recordServed: true });
  const served = new ServedTracker(upstream.mock.served);

  const cli = Bun.spawnSync([BUN, "src/cli.ts", "app", "create", "--name", "soak"], { cwd: REPO_ROOT, env: childEnv({ DATABASE_URL: databaseUrl }) });
  if (cli.exitCode !== 0) throw new Error(`app create failed: ${cli.stderr.toString()}`);
  const { secretKey } = JSON.parse(cli.stdout.toString().trim()) as { secretKey: string };

  const port = freePort();
  const proxy = spawnProxy(
    await bundleService(join(REPO_ROOT, "src/index.ts"), join(REPO_ROOT, SERVER_BUNDLE_DIR)),
    childEnv({
      NODE_ENV: "production",
      PORT: String(port),
      HOST: "127.0.0.1",
      DATABASE_URL: databaseUrl,
      REDIS_URL: redis.url,
      UPSTREAM_BASE_URL: upstream.url,
      UPSTREAM_API_KEY: "sk-or-soak",
      ...RUNTIME_ENV,
      LOG_LEVEL: "warn",
      METRICS_TOKEN: SOAK_METRICS_TOKEN,
      ...proxyEnv,
    }),
    `http://127.0.0.1:${port}`,
  );
  await waitForHealthy(proxy);

  const stack: SoakStack = {
    dir,
    databasePath,
    redis,
    upstream,
    served,
    proxy,
    auth: { authorization: `Bearer ${secretKey}` },
    async cleanup(keepDir) {
      served.stop();
      await proxy.stop(5000);
      await upstream.stop();
      await redis.stop();
      if (!keepDir) rmSync(dir, { recursive: true, force: true });
    },
  };
  return stack;
}

/** The operator's token the soak's proxy runs with: /healthz shows its counters only with it. */
export const SOAK_METRICS_TOKEN = "soak-metrics-token-0123456789";

function spawnProxy(bundle: string, env: Record<string, string>, baseUrl: string): SoakProxy {
  const proc: Subprocess<"ignore", "pipe", "pipe"> = Bun.spawn([BUN, bundle], { cwd: REPO_ROOT, env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const logs: ProxyLogCounts = { warn: 0, error: 0, examples: [], stderr: 0 };
  const tail: string[] = [];
  const keep = (line: string) => {
    tail.push(line);
    if (tail.length > 200) tail.shift();
  };
  const drained = Promise.all([
    readLines(proc.stdout, (lines) => {
      for (const line of lines) {
        keep(line);
        const level = /"level":"(warn|error)"/.exec(line)?.[1] as "warn" | "error" | undefined;
        if (!level) continue;
        logs[level]++;
        if (logs.examples.length < 10) logs.examples.push(line.slice(0, 400));
      }
    }),
    readLines(proc.stderr, (lines) => {
      for (const line of lines) {
        keep(line);
        if (line.trim() === "") continue;
        logs.stderr++;
        if (logs.examples.length < 10) logs.examples.push(`stderr: ${line.slice(0, 400)}`);
      }
    }),
  ]);
  const exited = proc.exited.then(async (code) => {
    await drained;
    return code;
  });
  return {
    pid: proc.pid,
    baseUrl,
    logs,
    tail,
    exited,
    async stop(graceMs) {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      proc.kill("SIGTERM");
      const done = await Promise.race([exited.then(() => true), Bun.sleep(graceMs).then(() => false)]);
      if (!done) {
        proc.kill("SIGKILL");
        await exited;
        return null;
      }
      return proc.exitCode;
    },
  };
}

async function waitForHealthy(proxy: SoakProxy): Promise<void> {
  const deadline = Date.now() + 30_000;
  let exited = false;
  void proxy.exited.then(() => (exited = true));
  while (Date.now() < deadline) {
    if (exited) throw new Error(`the proxy exited at start:\n${proxy.tail.join("\n")}`);
    try {
      if ((await fetch(`${proxy.baseUrl}/healthz`)).status === 200) return;
    } catch {
      // not listening yet
    }
    await Bun.sleep(100);
  }
  throw new Error(`the proxy was not healthy within 30 s:\n${proxy.tail.join("\n")}`);
}

/** Connects every user the way an app does: POST /sessions (secret key), then POST /connections (session token). */
export async function connectUsers(baseUrl: string, auth: Record<string, string>, users: SoakUser[]): Promise<void> {
  const connect = async (user: SoakUser) => {
    const session = await fetch(`${baseUrl}/api/v1/sessions`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ appUserId: user.id }),
    });
    if (session.status !== 200) throw new Error(`POST /sessions for ${user.id}: ${session.status} ${await session.text()}`);
    const { token } = (await session.json()) as { token: string };
    const approved = await fetch(`${baseUrl}/api/v1/connections`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ monthlyUsd: user.monthlyUsd }),
    });
    if (approved.status !== 200) throw new Error(`POST /connections for ${user.id}: ${approved.status} ${await approved.text()}`);
  };
  for (let i = 0; i < users.length; i += 10) await Promise.all(users.slice(i, i + 10).map(connect));
}
