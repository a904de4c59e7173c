/**
 * A scale-out deployment on PostgreSQL: one real Postgres server (tests/helpers/postgres.ts),
 * optionally one real redis-server, one mock upstream over HTTP that records what it billed,
 * and N proxy processes (the bundle, as `npm start` runs it) sharing them. The app is created with the
 * operator CLI against the same DATABASE_URL; users connect over HTTP.
 */
import { SQL } from "bun";
import { startMockUpstream, type RunningMockUpstream } from "../../packages/mock-upstream/src";
import { startPostgres, type PostgresOptions, type TestPostgres } from "./postgres";
import { startRedis, type TestRedis } from "./redis";
import { cliCreateApp, connectOverHttp, startServer, type RunningServer } from "./server";
import { CLUSTER_JWT_SECRET, CLUSTER_METRICS_TOKEN, OPERATOR_AUTH, type Health } from "./cluster";

/** A short chat call the mock upstream answers with six tokens, JSON or streamed. */
export const shortChat = (stream: boolean) => ({
  model: "openai/gpt-4o-mini",
  messages: [{ role: "user", content: "hi [[mock tokens=6]]" }],
  max_tokens: 16,
  stream,
});

export interface PgCluster {
  postgres: TestPostgres;
  redis: TestRedis | null;
  upstream: RunningMockUpstream;
  databaseUrl: string;
  servers: RunningServer[];
  appId: string;
  secretKey: string;
  /** A client on the shared database, for assertions. */
  sql: SQL;
  pick(i: number): RunningServer;
  connect(appUserId: string, monthlyUsd: number, via?: RunningServer): Promise<void>;
  chat(via: RunningServer, appUserId: string, body: unknown): Promise<Response>;
  status(via: RunningServer, appUserId: string): Promise<{ usage: { monthlyUsd: number }; remainingUsd: number }>;
  health(via: RunningServer): Promise<Health & { store: { kind: string; ok: boolean }; budget: { kind: string; ok: boolean } }>;
  /** Starts one more proxy process on the same database (e.g. after a SIGKILL). */
  addServer(): Promise<RunningServer>;
  /** The user's ledger rows, in the shared database. */
  ledger(appUserId: string): Promise<Array<{ request_id: string; cost_nano: number; status: string }>>;
  /** USD the mock upstream billed for generations it served to completion or cut. */
  billedUsd(): number;
  stop(): Promise<void>;
}

export async function startPgCluster(
  options: { instances?: number; redis?: boolean | { snapshots: true }; env?: Record<string, string>; postgres?: PostgresOptions } = {},
): Promise<PgCluster> {
  const postgres = await startPostgres(options.postgres);
  const databaseUrl = await postgres.createDatabase();
  const redis = options.redis ? await startRedis(options.redis === true ? {} : options.redis) : null;
  const upstream = await startMockUpstream({ recordServed: true });
  const sql = new SQL(databaseUrl, { max: 2 });
  const servers: RunningServer[] = [];
  const cleanup = async () => {
    await Promise.all(servers.map((s) => s.stop().catch(() => {})));
    await sql.close({ timeout: 0 }).catch(() => {});
    await upstream.stop();
    await redis?.stop();
    await postgres.destroy();
  };
  try {
    const created = await cliCreateApp(`${databaseUrl}`, "pg cluster app");
    const env: Record<string, string> = {
      UPSTREAM_BASE_URL: upstream.url,
      UPSTREAM_API_KEY: "sk-or-cluster",
      JWT_SECRET: CLUSTER_JWT_SECRET,
      METRICS_TOKEN: CLUSTER_METRICS_TOKEN,
      USAGE_FLUSH_MS: "10",
      BUN_CONFIG_MAX_HTTP_REQUESTS: "4096",
      LOG_LEVEL: "warn",
      ...(redis ? { REDIS_URL: redis.url } : {}),
      ...options.env,
    };
    const addServer = async () => {
      const server = await startServer({ databaseUrl, env });
      servers.push(server);
      return server;
    };
    // Started together: migrations and the lease registration race, as in a real rollout.
    await Promise.all(Array.from({ length: options.instances ?? 3 }, addServer));
    const auth = { authorization: `Bearer ${created.secretKey}` };
    const getJson = async <T>(via: RunningServer, path: string, headers: Record<string, string> = auth): Promise<T> => {
      const res = await via.fetch(path, { headers });
      if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
      return (await res.json()) as T;
    };
    return {
      postgres,
      redis,
      upstream,
      databaseUrl,
      servers,
      appId: created.appId,
      secretKey: created.secretKey,
      sql,
      pick: (i) => servers[i % servers.length]!,
      connect: (appUserId, monthlyUsd, via = servers[0]!) => connectOverHttp(via, created.secretKey, appUserId, monthlyUsd),
      chat: (via, appUserId, body) =>
        via.fetch("/api/v1/chat/completions", {
          method: "POST",
          headers: { ...auth, "content-type": "application/json", "x-service-user": appUserId },
          body: JSON.stringify(body),
        }),
      status: (via, appUserId) => getJson(via, `/api/v1/status?appUserId=${encodeURIComponent(appUserId)}`),
      health: (via) => getJson(via, "/healthz", OPERATOR_AUTH),
      addServer,
      ledger: async (appUserId) => {
        const rows: Array<{ request_id: string; cost_nano: string; status: string }> =
          await sql`SELECT request_id, cost_nano, status FROM usage_ledger WHERE app_id = ${created.appId} AND app_user_id = ${appUserId}`;
        return rows.map((r) => ({ ...r, cost_nano: Number(r.cost_nano) }));
      },
      billedUsd: () => upstream.mock.served.reduce((sum, s) => sum + (s.status === 200 ? s.costUsd : 0), 0),
      stop: cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
