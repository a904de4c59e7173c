/**
 * A whole deployment for end-to-end tests: the mock upstream served over real HTTP
 * (startMockUpstream), a real proxy process (the bundle, tests/helpers/server.ts)
 * pointed at it with its own SQLite file, and one app created with the operator CLI. Users
 * are connected over HTTP the way an app does it: POST /sessions with the secret key, then
 * POST /connections with the session token.
 *
 * Everything the tests observe goes through public surfaces: the proxy's HTTP API, the
 * mock's `served` log, the process's exit code and, after exit, the SQLite file.
 */
import type { StatusView } from "../../src/services/connections";
import { Database } from "bun:sqlite";
import {
  createMockUpstream,
  startMockUpstream,
  type MockUpstream,
  type MockUpstreamOptions,
  type RunningMockUpstream,
  type ServedRequest,
} from "../../packages/mock-upstream/src";
import { parseSseEvents, type SseEvent } from "./openrouter-spec";
import { cliCreateApp, connectOverHttp, startServer, tempDatabase, type RunningServer } from "./server";

/** The upstream key the proxy is given; tests check it (and only it) reaches the mock. */
export const E2E_UPSTREAM_KEY = "sk-or-e2e";

/** One row of GET /api/v1/usage. */
export interface ApiUsageRow {
  requestId: string;
  model: string;
  generationId: string | null;
  promptTokens: number;
  completionTokens: number;
  costUsd: number;
  source: "upstream" | "computed" | "estimated";
  status: string;
  streamed: boolean;
  startedAt: string;
  finishedAt: string;
  reservedUsd: number | null;
}

/** GET /api/v1/status, as the service declares it. */
export type ApiStatus = StatusView;

export interface ProxyStackOptions {
  /** Extra environment for the proxy process (over the defaults below). */
  env?: Record<string, string>;
  /** Options of the mock upstream (defaults, models, ...). */
  mock?: MockUpstreamOptions;
  /**
   * Answers some upstream requests by hand (return a Response) and leaves the rest to the
   * mock (return undefined), for wire shapes no `[[mock]]` directive produces. The mock then
   * runs in-process behind this handler instead of on its own socket.
   */
  intercept?: (request: Request) => Response | undefined | Promise<Response | undefined>;
}

export interface ProxyStack {
  server: RunningServer;
  upstream: RunningMockUpstream;
  /** The mock's state: `mock.served` lists every chat request it received. */
  mock: MockUpstream;
  /** `<server>/api/v1`: the base URL a client library takes. */
  baseURL: string;
  appId: string;
  secretKey: string;
  /** The proxy's SQLite file (read it with `readLedgerRow` once the process has exited). */
  databasePath: string;
  /** Mints a session for the user (secret key) and approves `monthlyUsd` with it (session token). */
  connect(appUserId: string, monthlyUsd: number): Promise<void>;
  /** POST /api/v1/chat/completions with the secret key and `x-service-user` (unless null). */
  chat(appUserId: string | null, body: unknown, init?: { signal?: AbortSignal; headers?: Record<string, string> }): Promise<Response>;
  /** Every ledger row of the user in the current period (all pages), newest first. */
  usage(appUserId: string): Promise<ApiUsageRow[]>;
  /** Polls GET /usage until the user has at least `count` rows; throws after a generous bound. */
  waitForUsage(appUserId: string, count: number): Promise<ApiUsageRow[]>;
  status(appUserId: string): Promise<ApiStatus>;
  /** The mock's served requests from index `from` on (pass a length taken earlier). */
  servedSince(from: number): ServedRequest[];
  /** SIGTERM to the proxy; resolves with its exit code. Idempotent. */
  stopServer(): Promise<number>;
  /**
   * Once the proxy has exited (stopServer, or a signal sent to `server.proc`), starts a new
   * proxy process on the same SQLite file and mock, with the same environment plus `env`.
   * `server`, `baseURL` and every method then talk to the new process.
   */
  restartServer(env?: Record<string, string>): Promise<RunningServer>;
  /** Stops the proxy and the mock and deletes the temp directory. */
  stop(): Promise<void>;
}

/** Bound for eventual-state polling: only ever reached when something is broken. */
const POLL_BOUND_MS = 15_000;

export async function startProxyStack(options: ProxyStackOptions = {}): Promise<ProxyStack> {
  const db = tempDatabase();
  const upstream = options.intercept ? serveIntercepted(options.intercept, options.mock) : await startMockUpstream(options.mock);
  const serverEnv = {
    UPSTREAM_BASE_URL: upstream.url,
    UPSTREAM_API_KEY: E2E_UPSTREAM_KEY,
    USAGE_FLUSH_MS: "10",
    BUN_CONFIG_MAX_HTTP_REQUESTS: "4096",
    LOG_LEVEL: "warn",
    ...options.env,
  };
  let server: RunningServer;
  try {
    server = await startServer({ databaseUrl: db.databaseUrl, env: serverEnv });
  } catch (err) {
    await upstream.stop();
    db.cleanup();
    throw err;
  }
  const created = await cliCreateApp(db.databaseUrl, "e2e app");
  const auth = { authorization: `Bearer ${created.secretKey}` };

  const getJson = async <T>(path: string): Promise<T> => {
    const res = await server.fetch(path, { headers: auth });
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  };

  const usage = async (appUserId: string): Promise<ApiUsageRow[]> => {
    const rows: ApiUsageRow[] = [];
    let cursor: string | null = null;
    do {
      const query: string = `appUserId=${encodeURIComponent(appUserId)}&limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const page: { data: ApiUsageRow[]; nextCursor: string | null } = await getJson(`/api/v1/usage?${query}`);
      rows.push(...page.data);
      cursor = page.nextCursor;
    } while (cursor);
    return rows;
  };

  let serverStopped: Promise<number> | null = null;
  const stopServer = () => (serverStopped ??= server.stop());

  return {
    get server() {
      return server;
    },
    upstream,
    mock: upstream.mock,
    get baseURL() {
      return `${server.baseUrl}/api/v1`;
    },
    appId: created.appId,
    secretKey: created.secretKey,
    databasePath: db.path,

    connect: (appUserId, monthlyUsd) => connectOverHttp(server, created.secretKey, appUserId, monthlyUsd),

    chat(appUserId, body, init = {}) {
      const headers: Record<string, string> = { ...auth, "content-type": "application/json", ...init.headers };
      if (appUserId !== null) headers["x-service-user"] = appUserId;
      return server.fetch("/api/v1/chat/completions", { method: "POST", headers, body: JSON.stringify(body), signal: init.signal });
    },

    usage,

    async waitForUsage(appUserId, count) {
      const deadline = Date.now() + POLL_BOUND_MS;
      for (;;) {
        const rows = await usage(appUserId);
        if (rows.length >= count) return rows;
        if (Date.now() > deadline) throw new Error(`user ${appUserId} has ${rows.length} ledger rows, expected ${count}: ${JSON.stringify(rows)}`);
        await Bun.sleep(20);
      }
    },

    status: (appUserId) => getJson<ApiStatus>(`/api/v1/status?appUserId=${encodeURIComponent(appUserId)}`),

    servedSince: (from) => upstream.mock.served.slice(from),

    stopServer,

    async restartServer(env = {}) {
      await server.proc.exited;
      server = await startServer({ databaseUrl: db.databaseUrl, env: { ...serverEnv, ...env } });
      serverStopped = null;
      return server;
    },

    async stop() {
      try {
        await stopServer();
      } finally {
        await upstream.stop();
        db.cleanup();
      }
    },
  };
}

function serveIntercepted(intercept: NonNullable<ProxyStackOptions["intercept"]>, options?: MockUpstreamOptions): RunningMockUpstream {
  const mock = createMockUpstream(options);
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    // Like startMockUpstream: silences are the tests' business, never cut by the upstream.
    idleTimeout: 0,
    fetch: async (request) => (await intercept(request)) ?? mock.fetch(request),
  });
  return { url: `http://127.0.0.1:${server.port}/api/v1`, mock, stop: () => server.stop(true) };
}

/** Reads one ledger row straight from a proxy's SQLite file (after the process has exited). */
export function readLedgerRow(databasePath: string, requestId: string): Record<string, unknown> | null {
  const db = new Database(databasePath, { readonly: true });
  try {
    return db.query("SELECT * FROM usage_ledger WHERE request_id = ?").get(requestId) as Record<string, unknown> | null;
  } finally {
    db.close();
  }
}

/** A USD amount from the API or the mock as integer nano-dollars (exact for the mock's prices). */
export function nano(usd: number): number {
  return Math.round(usd * 1e9);
}

/** Polls `check` until it returns a value other than undefined/false; throws after a generous bound. */
export async function eventually<T>(what: string, check: () => T | undefined | false | Promise<T | undefined | false>): Promise<T> {
  const deadline = Date.now() + POLL_BOUND_MS;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await Bun.sleep(20);
  }
}

/**
 * Reads a streamed chat response event by event as it arrives (LF-delimited events, as the
 * mock writes them by default), keeping the whole text for validation at the end.
 */
export class SseReader {
  /** Everything received so far, decoded. */
  text = "";
  private readonly reader: { read(): Promise<{ value?: Uint8Array; done: boolean }>; cancel(reason?: unknown): Promise<void> };
  private readonly decoder = new TextDecoder();
  private pending = "";
  private queue: SseEvent[] = [];

  constructor(response: Response) {
    if (!response.body) throw new Error("the response has no body");
    this.reader = response.body.getReader();
  }

  /** The next complete event (data or comment), or null at the end of the stream. */
  async next(): Promise<SseEvent | null> {
    while (this.queue.length === 0) {
      const { value, done } = await this.reader.read();
      if (done) return null;
      const piece = this.decoder.decode(value, { stream: true });
      this.text += piece;
      this.pending += piece;
      const end = this.pending.lastIndexOf("\n\n");
      if (end === -1) continue;
      this.queue.push(...parseSseEvents(this.pending.slice(0, end + 2)));
      this.pending = this.pending.slice(end + 2);
    }
    return this.queue.shift()!;
  }

  /** Reads up to and including the first chunk that carries content; returns that chunk. */
  async untilContent(): Promise<{ id: string; content: string }> {
    for (;;) {
      const event = await this.next();
      if (event === null) throw new Error(`the stream ended before any content:\n${this.text}`);
      if (event.data === undefined || event.data === "[DONE]") continue;
      const chunk = JSON.parse(event.data) as { id: string; choices: Array<{ delta?: { content?: string } }> };
      const content = chunk.choices[0]?.delta?.content;
      if (content) return { id: chunk.id, content };
    }
  }

  /** Reads to the end; returns the whole text of the stream. */
  async rest(): Promise<string> {
    while ((await this.next()) !== null) {
      // keep reading
    }
    return this.text;
  }

  cancel(): Promise<void> {
    return this.reader.cancel();
  }
}
