/**
 * Builds apps for tests through the real createApp/createDeps with an in-memory SQLite
 * store, a ManualClock and a memory logger, and calls them with `app.handle`. Elysia routes
 * on the URL, so requests use a real-looking host (localhost).
 */
import { createApp } from "../../src/app";
import { createDeps, type Deps } from "../../src/deps";
import { loadConfig } from "../../src/config";
import { openSqliteStore } from "../../src/store/sqlite";
import type { Database } from "bun:sqlite";
import { ManualClock } from "../../src/clock";
import { memoryLogger } from "../../src/logger";
import { demoUpstreamClient } from "../../src/upstream/demo-upstream";
import * as mockUpstream from "../../packages/mock-upstream/src";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

/** Known JWT secret so tests can forge tokens that differ from real ones in one claim only. */
export const TEST_JWT_SECRET = "test-jwt-secret-0123456789abcdefghijklmnopqrstuvwxyz";
/** 2026-01-15T00:00:00Z: the default start of every test clock. */
export const T0 = Date.UTC(2026, 0, 15);

export interface TestApp {
  app: ReturnType<typeof createApp>;
  deps: Deps;
  /** The in-memory SQLite database behind deps.store, for direct reads and edits. */
  db: Database;
  clock: ManualClock;
  logger: ReturnType<typeof memoryLogger>;
  /** Sends one request to the app; `path` starts with `/`. */
  call(path: string, init?: CallInit): Promise<Response>;
  /** Creates an app in the store and returns its id and first key. */
  createClientApp(opts?: { name?: string; origins?: string[] }): Promise<ClientApp>;
}

export interface ClientApp {
  appId: string;
  keyId: string;
  secretKey: string;
}

export interface CallInit {
  method?: string;
  /** Sent as `Authorization: Bearer <bearer>`. */
  bearer?: string;
  headers?: Record<string, string>;
  /** Objects are sent as JSON; strings as they are (with a JSON content-type). */
  json?: unknown;
  body?: string;
}

export function makeTestApp(opts: { env?: Record<string, string>; now?: number } = {}): TestApp {
  // Demo mode's streams unpaced: at full speed (tests/helpers/server.ts does the same).
  const config = loadConfig({ JWT_SECRET: TEST_JWT_SECRET, DEMO_STREAM_TOKENS_PER_SECOND: "0", ...opts.env });
  const clock = new ManualClock(opts.now ?? T0);
  const logger = memoryLogger();
  const store = openSqliteStore(":memory:");
  // Demo mode's upstream as openDeps builds it, on the mock imported here (createDeps is synchronous).
  const upstream = config.demoMode ? demoUpstreamClient(mockUpstream, config) : undefined;
  const deps = createDeps(config, { store, clock, logger, upstream });
  const app = createApp(deps);
  return {
    app,
    deps,
    db: store.db,
    clock,
    logger,
    call: (path, init = {}) => app.handle(buildRequest(path, init)),
    async createClientApp({ name = "test app", origins = [] } = {}) {
      const { app: created, key } = await createAppWithKey(deps.store.apps, name, origins, clock.now());
      return { appId: created.id, keyId: key.keyId, secretKey: key.secretKey };
    },
  };
}

export function buildRequest(path: string, init: CallInit = {}): Request {
  const headers: Record<string, string> = { ...init.headers };
  if (init.bearer !== undefined) headers["authorization"] = `Bearer ${init.bearer}`;
  let body: string | undefined = init.body;
  if (init.json !== undefined) {
    body = typeof init.json === "string" ? init.json : JSON.stringify(init.json);
    headers["content-type"] ??= "application/json";
  }
  return new Request(`http://localhost${path}`, { method: init.method ?? (body !== undefined ? "POST" : "GET"), headers, body });
}

/** POST /api/v1/sessions with a secret key; returns the token (asserting 200). */
export async function mintSession(t: TestApp, secretKey: string, appUserId: string, requestLimitUsd?: number): Promise<string> {
  const json: Record<string, unknown> = { appUserId };
  if (requestLimitUsd !== undefined) json.requestLimit = { monthlyUsd: requestLimitUsd };
  const res = await t.call("/api/v1/sessions", { bearer: secretKey, json });
  if (res.status !== 200) throw new Error(`minting a session failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}

/** Reads an error response and returns its envelope, asserting its shape loosely. */
export async function errorOf(res: Response): Promise<{ status: number; code: string; message: string; body: unknown }> {
  const body = (await res.json()) as { error?: { code?: unknown; message?: unknown } };
  if (!body.error || typeof body.error.code !== "string" || typeof body.error.message !== "string") {
    throw new Error(`not an error envelope: ${JSON.stringify(body)}`);
  }
  return { status: res.status, code: body.error.code, message: body.error.message, body };
}
