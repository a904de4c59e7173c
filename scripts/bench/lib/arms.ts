/**
 * The systems under test, each started as its own process on the SUT core:
 *   a  direct to the upstream       b  bare Bun.serve forwarder (./bare-forwarder.ts)
 *   c  this service, embedded       d  this service with REDIS_URL
 *   e  Portkey's gateway (@portkey-ai/gateway, on Node)
 *   f  this service on PostgreSQL (budgets, limits and ledger in Postgres)
 *   g  this service on PostgreSQL + REDIS_URL (Redis fast path, ledger batched into Postgres)
 *   g2 two processes of (g) sharing its Redis and PostgreSQL, against one (./two-processes.ts)
 */
import { Database } from "bun:sqlite";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { BUN, childEnv, freePort, pin, REPO_ROOT, spawnPinned, waitForHttp, type Child } from "./proc";
import { peerGatewayScript } from "./peer-gateway";
import { bundleDirFor, bundleService } from "../../bundle";
import { RUNTIME_ENV } from "../../runtime-env";

export type ArmId = "a" | "b" | "c" | "d" | "e" | "f" | "g" | "g2";
export type ServiceArmId = "c" | "d" | "f" | "g";

export const SERVICE_ARMS: readonly ServiceArmId[] = ["c", "d", "f", "g"];
export const isServiceArm = (id: ArmId): id is ServiceArmId => (SERVICE_ARMS as readonly ArmId[]).includes(id);
/** The arms that need redis-server, and those that need PostgreSQL. */
export const REDIS_ARMS: readonly ArmId[] = ["d", "g", "g2"];
export const POSTGRES_ARMS: readonly ArmId[] = ["f", "g", "g2"];

export const ARM_LABELS: Record<ArmId, string> = {
  a: "(a) direct to the upstream",
  b: "(b) bare Bun forwarder",
  c: "(c) this service, embedded",
  d: "(d) this service + Redis",
  e: "(e) Portkey gateway",
  f: "(f) this service, PostgreSQL",
  g: "(g) this service, PostgreSQL + Redis",
  g2: "(g2) two processes of (g), sharing its stores",
};

export interface RunningArm {
  id: ArmId;
  /** POST target for chat completions. */
  url: string;
  headers: Record<string, string>;
  /** The process under test. */
  pid: number;
  /** GET /healthz writer.written, for the service arms. */
  rowsWritten?: () => Promise<number>;
  /** The process's output so far (its last 2,000 lines): the service logs JSON lines. */
  lines?: string[];
  stop(): Promise<void>;
}

export interface Upstream {
  /** Base URL ending in /api/v1. */
  url: string;
  pid: number;
  requestsServed(): Promise<number>;
}

export function startDirect(upstream: Upstream, sutCore: number, homeCore: number): RunningArm {
  pin(upstream.pid, sutCore);
  return {
    id: "a",
    url: `${upstream.url}/chat/completions`,
    headers: { authorization: "Bearer bench" },
    pid: upstream.pid,
    stop: async () => pin(upstream.pid, homeCore),
  };
}

export async function startBare(
  upstream: Upstream,
  core: number,
  bunFlags: string[] = [],
  script = "scripts/bench/bare-forwarder.ts",
  env: Record<string, string> = {},
): Promise<RunningArm> {
  const child = spawnPinned(
    "bare-forwarder",
    core,
    [BUN, ...bunFlags, script],
    childEnv({
      UPSTREAM_BASE_URL: upstream.url,
      // The service's fetch cap (scripts/runtime-env.ts), nothing else of its settings.
      BUN_CONFIG_MAX_HTTP_REQUESTS: RUNTIME_ENV.BUN_CONFIG_MAX_HTTP_REQUESTS,
      ...env,
    }),
  );
  const { url } = await child.firstJson<{ url: string }>();
  return { id: "b", url: `${url}/api/v1/chat/completions`, headers: {}, pid: child.pid, lines: child.lines, stop: async () => void (await child.stop()) };
}

export async function startPortkey(upstream: Upstream, core: number): Promise<RunningArm> {
  const port = freePort();
  const script = peerGatewayScript();
  const child = spawnPinned("portkey", core, ["node", script, `--port=${port}`, "--headless"], childEnv({ NODE_ENV: "production" }));
  await waitForHttp(`http://127.0.0.1:${port}/`);
  return {
    id: "e",
    url: `http://127.0.0.1:${port}/v1/chat/completions`,
    headers: { authorization: "Bearer bench", "x-portkey-provider": "openai", "x-portkey-custom-host": upstream.url },
    pid: child.pid,
    stop: async () => void (await child.stop()),
  };
}

/**
 * One database, app and connected user for the service arms; survives restarts of the
 * process. The database is the SQLite file at `databasePath`, or `postgresUrl` when set.
 */
export interface ServiceState {
  dir: string;
  databasePath: string;
  postgresUrl?: string;
  secretKey?: string;
  /** PostgreSQL: the SECRETS_KEY its CLI and service share (production takes the key from it alone). */
  secretsKey?: string;
  /** How many of the many-users users (lib/users.ts) are connected already. */
  usersConnected?: number;
}

/** DATABASE_URL for the service and its CLI. */
export const serviceDatabaseUrl = (state: ServiceState): string => state.postgresUrl ?? `sqlite:${state.databasePath}`;

export const BENCH_USER = "bench-user";

export async function startService(
  id: ServiceArmId,
  state: ServiceState,
  upstream: Upstream,
  core: number,
  redisUrl: string | null,
  /**
   * e.g. --cpu-prof; `entry` replaces src/index.ts (a variant for profiling); an `entry`
   * without a .ts or .js ending is an executable run as it is (the single binary). A
   * `…/src/index.ts` entry, the default too, is bundled first, as `npm start` does.
   */
  run: { bunFlags?: string[]; entry?: string; env?: Record<string, string> } = {},
): Promise<RunningArm> {
  const databaseUrl = serviceDatabaseUrl(state);
  if (state.postgresUrl) state.secretsKey ??= randomBytes(32).toString("base64");
  const sealing: Record<string, string> = state.secretsKey ? { SECRETS_KEY: state.secretsKey } : {};
  if (!state.secretKey) {
    const cli = Bun.spawnSync([BUN, "src/cli.ts", "app", "create", "--name", "bench"], {
      cwd: REPO_ROOT,
      env: childEnv({ DATABASE_URL: databaseUrl, ...sealing }),
    });
    if (cli.exitCode !== 0) throw new Error(`app create failed: ${cli.stderr.toString()}`);
    state.secretKey = (JSON.parse(cli.stdout.toString().trim()) as { secretKey: string }).secretKey;
  }
  const port = freePort();
  const env = childEnv({
    NODE_ENV: "production",
    PORT: String(port),
    HOST: "127.0.0.1",
    DATABASE_URL: databaseUrl,
    ...sealing,
    UPSTREAM_BASE_URL: upstream.url,
    UPSTREAM_API_KEY: "sk-or-bench",
    // Bun's settings as `npm start` sets them; the bare forwarder (b) keeps Bun's defaults
    // but for the fetch cap, so the ratios are against plain Bun.
    ...RUNTIME_ENV,
    // On, but never binding: every request passes through the limiter; connecting
    // thousands of users (lib/users.ts) is as many session mints.
    RL_CHAT_LIMIT: "1000000000",
    RL_SESSIONS_LIMIT: "1000000000",
    MAX_MONTHLY_USD: "1000000",
    LOG_LEVEL: "warn",
    ...(redisUrl ? { REDIS_URL: redisUrl } : {}),
    ...run.env,
  });
  const entry = run.entry ?? "src/index.ts";
  // The service's entry (this checkout's or a worktree's) runs as `npm start` runs it:
  // bundled. Relative to the repository, as the child's working directory is.
  const source = resolve(REPO_ROOT, entry);
  const runnable = entry.endsWith("src/index.ts") ? await bundleService(source, bundleDirFor(source)) : entry;
  const argv = /\.[cm]?[jt]s$/.test(runnable) ? [BUN, ...(run.bunFlags ?? []), runnable] : [runnable];
  const child = spawnPinned(`service-${id}`, core, argv, env);
  const base = `http://127.0.0.1:${port}`;
  await waitForHealthy(base, child);
  const auth = { authorization: `Bearer ${state.secretKey}` };
  await connectUser(base, auth);
  return {
    id,
    url: `${base}/api/v1/chat/completions`,
    headers: { ...auth, "x-service-user": BENCH_USER },
    pid: child.pid,
    lines: child.lines,
    // The rows committed, counted in the database itself (/healthz shows its writer's
    // counters only with METRICS_TOKEN, which would load the metrics into the service).
    rowsWritten: state.postgresUrl ? async () => (await postgresLedgerRows(state.postgresUrl!)).total : async () => ledgerRows(state.databasePath).total,
    stop: async () => {
      const code = await child.stop(60_000);
      if (code !== 0) throw new Error(`service ${id} exited with ${code}:\n${child.lines.slice(-20).join("\n")}`);
    },
  };
}

async function waitForHealthy(base: string, child: Child): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (child.proc.exitCode !== null) throw new Error(`service exited at start:\n${child.lines.join("\n")}`);
    try {
      if ((await fetch(`${base}/healthz`)).status === 200) return;
    } catch {
      // not listening yet
    }
    await Bun.sleep(100);
  }
  throw new Error(`service not healthy in 20 s:\n${child.lines.join("\n")}`);
}

/** POST /sessions for the user (secret key), who then approves a budget no bench run reaches (session token). */
export async function connectUser(base: string, auth: Record<string, string>, appUserId = BENCH_USER): Promise<void> {
  const session = await fetch(`${base}/api/v1/sessions`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ appUserId }),
  });
  if (session.status !== 200) throw new Error(`POST /sessions: ${session.status} ${await session.text()}`);
  const { token } = (await session.json()) as { token: string };
  const approved = await fetch(`${base}/api/v1/connections`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ monthlyUsd: 1_000_000 }),
  });
  if (approved.status !== 200) throw new Error(`POST /connections: ${approved.status} ${await approved.text()}`);
}

/** Rows in the service's usage ledger (read-only, from the SQLite file; postgresLedgerRows below for PostgreSQL). */
export function ledgerRows(databasePath: string): { total: number; byStatus: Record<string, number> } {
  if (!existsSync(databasePath)) return { total: 0, byStatus: {} };
  const db = new Database(databasePath, { readonly: true });
  try {
    const rows = db.query<{ status: string; n: number }, []>("SELECT status, count(*) AS n FROM usage_ledger GROUP BY status").all();
    const byStatus = Object.fromEntries(rows.map((r) => [r.status, r.n]));
    return { total: rows.reduce((a, r) => a + r.n, 0), byStatus };
  } finally {
    db.close();
  }
}

/** Rows in a PostgreSQL usage ledger by status (Bun's SQL client), and the sum of usage_totals.request_count. */
export async function postgresLedgerRows(url: string): Promise<{ total: number; byStatus: Record<string, number>; totalsRequestCount: number }> {
  const sql = new Bun.SQL(url, { max: 1 });
  try {
    const exists = (await sql`SELECT to_regclass('public.usage_ledger') IS NOT NULL AS ok`) as Array<{ ok: boolean }>;
    if (!exists[0]?.ok) return { total: 0, byStatus: {}, totalsRequestCount: 0 };
    const rows = (await sql`SELECT status, count(*)::bigint AS n FROM usage_ledger GROUP BY status`) as Array<{ status: string; n: string | number }>;
    const [totals] = (await sql`SELECT coalesce(sum(request_count), 0)::bigint AS n FROM usage_totals`) as Array<{ n: string | number }>;
    const byStatus = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
    return { total: rows.reduce((a, r) => a + Number(r.n), 0), byStatus, totalsRequestCount: Number(totals?.n ?? 0) };
  } finally {
    await sql.close({ timeout: 1 });
  }
}

export interface RunningRedis {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/** `core` null: not pinned (the soak shares the machine as it is). */
export async function startRedis(core: number | null): Promise<RunningRedis> {
  const port = freePort();
  const child = spawnPinned("redis", core, ["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], childEnv());
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      const pong = await redisPing(port);
      if (pong) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`redis-server did not answer:\n${child.lines.join("\n")}`);
    await Bun.sleep(50);
  }
  return { url: `redis://127.0.0.1:${port}`, pid: child.pid, stop: async () => void (await child.stop()) };
}

function redisPing(port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    Bun.connect({
      hostname: "127.0.0.1",
      port,
      socket: {
        open: (s) => void s.write("PING\r\n"),
        data: (s, d) => {
          resolve(d.toString().startsWith("+PONG"));
          s.end();
        },
        error: (_s, e) => reject(e),
        connectError: (_s, e) => reject(e),
      },
    }).catch(reject);
  });
}
