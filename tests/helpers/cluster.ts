/**
 * A scale-out deployment for tests: one real redis-server, one mock upstream over HTTP, one
 * SQLite file, and TWO proxy processes (the bundle, as `npm start` runs it) sharing all three, as two
 * instances behind a load balancer would. The app is created once with the operator CLI;
 * users are connected over HTTP (POST /sessions, then POST /connections).
 *
 * What tests observe goes through public surfaces: each process's HTTP API and /healthz,
 * and the shared SQLite file (read-only; WAL lets a reader in while the servers write).
 */
import { Database } from "bun:sqlite";
import { startMockUpstream, type RunningMockUpstream } from "../../packages/mock-upstream/src";
import { startRedis, type TestRedis } from "./redis";
import { cliCreateApp, connectOverHttp, startServer, tempDatabase, type RunningServer } from "./server";

/** Shared by both processes, so a session minted by one is valid on the other. */
export const CLUSTER_JWT_SECRET = "cluster-jwt-secret-0123456789abcdefghijklmnop";
/** The operator's token of every cluster process: /healthz shows its counters only with it. */
export const CLUSTER_METRICS_TOKEN = "cluster-metrics-token-0123456789";
export const OPERATOR_AUTH = { authorization: `Bearer ${CLUSTER_METRICS_TOKEN}` };
/** Bound for eventual-state polling: only ever reached when something is broken. */
export const POLL_BOUND_MS = 20_000;

export interface Cluster {
  redis: TestRedis;
  upstream: RunningMockUpstream;
  servers: [RunningServer, RunningServer];
  appId: string;
  secretKey: string;
  databasePath: string;
  /** The server for the i-th request of a run: alternates between the two processes. */
  pick(i: number): RunningServer;
  /** Mints a session (secret key) and approves `monthlyUsd` with it (session token), on `via`. */
  connect(appUserId: string, monthlyUsd: number, via?: RunningServer): Promise<void>;
  /** POST /api/v1/chat/completions as `appUserId` on `via`. */
  chat(via: RunningServer, appUserId: string, body: unknown): Promise<Response>;
  /** POST /api/v1/sessions on `via`. */
  session(via: RunningServer, appUserId: string): Promise<Response>;
  status(via: RunningServer, appUserId: string): Promise<{ usage: { monthlyUsd: number }; limits: { monthlyUsd: number }; remainingUsd: number }>;
  health(via: RunningServer): Promise<Health>;
  /** Polls until both processes report an empty usage-writer queue. */
  waitForFlush(): Promise<void>;
  /** The user's ledger rows in the shared SQLite file (every period). */
  ledger(appUserId: string): Array<{ request_id: string; cost_nano: number; status: string; streamed: number }>;
  /** The durable total of an account (usage_totals), 0 when absent. */
  totalNano(account: string): number;
  stop(): Promise<void>;
}

export interface Health {
  status: string;
  limiter: { kind: string; degraded: boolean; since: string | null; lastError: string | null };
  budget: { kind: string };
  writer: { pending: number; written: number };
}

/** Polls `probe` until it returns a value that is not undefined; throws after POLL_BOUND_MS. */
export async function pollUntil<T>(what: string, probe: () => Promise<T | undefined>, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + POLL_BOUND_MS;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`);
    await Bun.sleep(intervalMs);
  }
}

export async function startCluster(options: { env?: Record<string, string> } = {}): Promise<Cluster> {
  const db = tempDatabase();
  const redis = await startRedis();
  const upstream = await startMockUpstream({ recordServed: false });
  const started: RunningServer[] = [];
  const cleanup = async () => {
    await Promise.all(started.map((s) => s.stop()));
    await upstream.stop();
    await redis.stop();
    db.cleanup();
  };
  try {
    // The CLI creates (and migrates) the database first, so the two servers neither race
    // on migrations nor create a default app.
    const created = await cliCreateApp(db.databaseUrl, "cluster app");
    const env = {
      REDIS_URL: redis.url,
      UPSTREAM_BASE_URL: upstream.url,
      UPSTREAM_API_KEY: "sk-or-cluster",
      JWT_SECRET: CLUSTER_JWT_SECRET,
      METRICS_TOKEN: CLUSTER_METRICS_TOKEN,
      USAGE_FLUSH_MS: "10",
      BUN_CONFIG_MAX_HTTP_REQUESTS: "4096",
      LOG_LEVEL: "warn",
      ...options.env,
    };
    const [a, b] = await Promise.all(
      [0, 1].map(() =>
        startServer({ databaseUrl: db.databaseUrl, env }).then((s) => {
          started.push(s);
          return s;
        }),
      ),
    );
    const servers: [RunningServer, RunningServer] = [a!, b!];
    const auth = { authorization: `Bearer ${created.secretKey}` };

    const getJson = async <T>(via: RunningServer, path: string, headers: Record<string, string> = auth): Promise<T> => {
      const res = await via.fetch(path, { headers });
      if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
      return (await res.json()) as T;
    };
    const session = (via: RunningServer, appUserId: string) =>
      via.fetch("/api/v1/sessions", { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ appUserId }) });
    const health = (via: RunningServer) => getJson<Health>(via, "/healthz", OPERATOR_AUTH);
    const readDb = <T>(read: (db: Database) => T): T => {
      const handle = new Database(db.path, { readonly: true });
      try {
        return read(handle);
      } finally {
        handle.close();
      }
    };

    return {
      redis,
      upstream,
      servers,
      appId: created.appId,
      secretKey: created.secretKey,
      databasePath: db.path,
      pick: (i) => servers[i % 2]!,
      connect: (appUserId, monthlyUsd, via = servers[0]) => connectOverHttp(via, created.secretKey, appUserId, monthlyUsd),
      chat: (via, appUserId, body) =>
        via.fetch("/api/v1/chat/completions", {
          method: "POST",
          headers: { ...auth, "content-type": "application/json", "x-service-user": appUserId },
          body: JSON.stringify(body),
        }),
      session,
      status: (via, appUserId) => getJson(via, `/api/v1/status?appUserId=${encodeURIComponent(appUserId)}`),
      health,
      async waitForFlush() {
        await pollUntil("both usage writers to flush", async () => {
          const states = await Promise.all(servers.map(health));
          return states.every((h) => h.writer.pending === 0) ? true : undefined;
        });
      },
      ledger: (appUserId) =>
        readDb((h) =>
          h
            .query<{ request_id: string; cost_nano: number; status: string; streamed: number }, [string, string]>(
              "SELECT request_id, cost_nano, status, streamed FROM usage_ledger WHERE app_id = ? AND app_user_id = ?",
            )
            .all(created.appId, appUserId),
        ),
      totalNano: (account) =>
        readDb((h) => h.query<{ spent_nano: number }, [string]>("SELECT spent_nano FROM usage_totals WHERE account = ?").get(account)?.spent_nano ?? 0),
      stop: cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
