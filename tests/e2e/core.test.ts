/**
 * The core service as an operator and an app developer meet it: a real service process
 * (the bundle `npm start` runs) on an empty temp database, the operator CLI against the same DATABASE_URL, and
 * plain HTTP. The tests in the first block run in order against one server.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { cliCreateApp, runCli, runServerToExit, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { UUID } from "../helpers/expect";
import { loadConfig } from "../../src/config";
import { resolveSecretBox } from "../../src/secrets/secrets-key";
import { sealedContext } from "../../src/secrets/secret-box";

const db = tempDatabase();
let server: RunningServer;
let defaultApp: { appId: string; secretKey: string };
/** Every secret this run handed out or used; none may appear in a log line. */
const secrets = new Set<string>();

function remember(...values: string[]): void {
  for (const value of values) {
    secrets.add(value);
    // A key's secret part on its own would be as bad as the whole key.
    const secretPart = /^sk_live_[a-z0-9]+_([0-9A-Za-z]{32})$/.exec(value)?.[1];
    if (secretPart) secrets.add(secretPart);
  }
}

async function api(path: string, init: { method?: string; bearer?: string; json?: unknown; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { ...init.headers };
  if (init.bearer) headers.authorization = `Bearer ${init.bearer}`;
  if (init.json !== undefined) headers["content-type"] = "application/json";
  const res = await server.fetch(path, {
    method: init.method ?? (init.json !== undefined ? "POST" : "GET"),
    headers,
    body: init.json === undefined ? undefined : JSON.stringify(init.json),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, body: text ? (JSON.parse(text) as any) : undefined };
}

async function mint(secretKey: string, appUserId: string, monthlyUsd?: number): Promise<string> {
  const res = await api("/api/v1/sessions", { bearer: secretKey, json: { appUserId, ...(monthlyUsd ? { requestLimit: { monthlyUsd } } : {}) } });
  expect(res.status).toBe(200);
  remember(res.body.token);
  return res.body.token as string;
}

beforeAll(async () => {
  server = await startServer({ databaseUrl: db.databaseUrl, env: { MAX_BODY_BYTES: "4096" } });
});

afterAll(async () => {
  if (server.proc.exitCode === null) await server.stop();
  db.cleanup();
});

describe("a real server on an empty database", () => {
  test("first start creates a default app and prints its key once, outside the JSON log", async () => {
    const appId = server.stdout.map((l) => /^\s+appId:\s+(\S+)$/.exec(l)?.[1]).find(Boolean);
    const secretKey = server.stdout.map((l) => /^\s+secretKey:\s+(sk_live_\S+)$/.exec(l)?.[1]).find(Boolean);
    expect(appId).toBeDefined();
    expect(secretKey).toStartWith(`sk_live_${appId}_`);
    defaultApp = { appId: appId!, secretKey: secretKey! };
    remember(defaultApp.secretKey);
    expect(server.stdout.filter((l) => l.includes(defaultApp.secretKey))).toHaveLength(1);
    const status = await api("/api/v1/status?appUserId=newcomer", { bearer: defaultApp.secretKey });
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({ connected: false });
  });

  test("GET /healthz over HTTP says demo mode, with a request id", async () => {
    const res = await api("/healthz");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "ok", mode: "demo" });
    expect(res.headers.get("x-request-id")).toMatch(UUID);
  });

  test("the README walk-through: create an app with the CLI, mint a session, connect, read the status", async () => {
    const created = await cliCreateApp(db.databaseUrl, "My app", ["http://localhost:3000"]);
    remember(created.secretKey);
    // The running server sees the new app without a restart.
    const session = await api("/api/v1/sessions", { bearer: created.secretKey, json: { appUserId: "alice", requestLimit: { monthlyUsd: 5 } } });
    expect(session.status).toBe(200);
    expect(session.body.expiresAt).toBeGreaterThan(Date.now() / 1000);
    remember(session.body.token);

    // As the README's curl does it: POST with the token and no body at all.
    const connected = await server.fetch("/api/v1/connections", { method: "POST", headers: { authorization: `Bearer ${session.body.token}` } });
    expect(connected.status).toBe(200);
    expect(await connected.json()).toMatchObject({ connected: true, appUserId: "alice", limits: { monthlyUsd: 5 }, remainingUsd: 5 });

    const status = await api("/api/v1/status?appUserId=alice", { bearer: created.secretKey });
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({ connected: true, limits: { monthlyUsd: 5 }, usage: { monthlyUsd: 0 }, remainingUsd: 5 });
    expect(Object.keys(status.body).sort()).toEqual(["connected", "fundingSource", "limits", "period", "remainingUsd", "resetsAt", "upstreamCredit", "usage"]);
    expect(Date.parse(status.body.resetsAt)).toBeGreaterThan(Date.now());

    // The browser on the app's registered origin may read the connection.
    const fromBrowser = await api("/api/v1/connections", { bearer: session.body.token, headers: { origin: "http://localhost:3000" } });
    expect(fromBrowser.headers.get("access-control-allow-origin")).toBe("http://localhost:3000");

    // The other app cannot see this user.
    const foreign = await api("/api/v1/status?appUserId=alice", { bearer: defaultApp.secretKey });
    expect(foreign.body).toMatchObject({ connected: false, limits: { monthlyUsd: 0 } });
  });

  test("a browser-style POST with an empty body (content-length: 0) approves the token's limit", async () => {
    const token = await mint(defaultApp.secretKey, "empty-body", 3);
    const res = await server.fetch("/api/v1/connections", {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "content-length": "0" },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).limits).toEqual({ monthlyUsd: 3 });
  });

  test("app create prints exactly one JSON line {appId, secretKey, name, origins, keyId}", async () => {
    const result = await runCli(db.databaseUrl, "app", "create", "--name", "Shape", "--origin", "https://shape.example", "--origin", "http://localhost:5173");
    expect(result.code).toBe(0);
    expect(result.stdout.trimEnd().split("\n")).toHaveLength(1);
    const line = result.json[0]!;
    remember(line.secretKey);
    expect(Object.keys(line).sort()).toEqual(["appId", "keyId", "name", "origins", "secretKey"]);
    expect(line).toMatchObject({ name: "Shape", origins: ["https://shape.example", "http://localhost:5173"] });
    expect(line.appId).not.toContain("_");
    expect(line.secretKey).toStartWith(`sk_live_${line.appId}_`);
  });

  test("app list shows every app and its keys, but no secret", async () => {
    const created = await cliCreateApp(db.databaseUrl, "Listed");
    remember(created.secretKey);
    const result = await runCli(db.databaseUrl, "app", "list");
    expect(result.code).toBe(0);
    const listed = result.json.find((a) => a.appId === created.appId);
    expect(listed).toMatchObject({ name: "Listed", origins: [], keys: [{ keyId: created.keyId, revokedAt: null }] });
    expect(result.json.map((a) => a.appId)).toContain(defaultApp.appId);
    for (const secret of secrets) expect(result.stdout).not.toContain(secret);
    expect(result.stdout).not.toMatch(/sk_live_/);
    expect(result.stdout.toLowerCase()).not.toContain("secret");
  });

  test("key rotate gives a second valid key while the first still works; key revoke makes the first 401", async () => {
    const created = await cliCreateApp(db.databaseUrl, "Rotating");
    remember(created.secretKey);
    const rotated = await runCli(db.databaseUrl, "key", "rotate", "--app", created.appId);
    expect(rotated.code).toBe(0);
    const second = rotated.json[0]!;
    remember(second.secretKey);
    expect(second).toMatchObject({ appId: created.appId });
    expect(second.keyId).not.toBe(created.keyId);
    expect(second.secretKey).not.toBe(created.secretKey);

    const statusWith = (key: string) => api("/api/v1/status?appUserId=u", { bearer: key });
    expect((await statusWith(created.secretKey)).status).toBe(200);
    expect((await statusWith(second.secretKey)).status).toBe(200);

    const revoked = await runCli(db.databaseUrl, "key", "revoke", "--app", created.appId, "--key", created.keyId);
    expect(revoked.code).toBe(0);
    expect(revoked.json[0]).toEqual({ appId: created.appId, keyId: created.keyId, revoked: true });

    const refused = await statusWith(created.secretKey);
    expect(refused.status).toBe(401);
    expect(refused.body).toEqual({ error: { code: "auth", message: expect.any(String) } });
    expect((await statusWith(second.secretKey)).status).toBe(200);

    const listed = (await runCli(db.databaseUrl, "app", "list")).json.find((a) => a.appId === created.appId)!;
    expect(listed.keys.find((k: any) => k.keyId === created.keyId).revokedAt).toEqual(expect.any(String));
    expect(listed.keys.find((k: any) => k.keyId === second.keyId).revokedAt).toBeNull();
  });

  test("the CLI refuses bad commands with a non-zero exit and no JSON", async () => {
    const cases: Array<[string[], number, RegExp]> = [
      [["key", "rotate", "--app", "appdoesnotexist"], 1, /no app/],
      [["key", "revoke", "--app", defaultApp.appId, "--key", "keynosuchkey"], 1, /no active key/],
      [["app", "create"], 2, /--name/],
      [["app", "create", "--name", "x", "--origin", "https://x.example/path"], 2, /--origin/],
      [["app", "create", "--name", "x", "--origin", "not a url"], 2, /--origin/],
      [["nonsense"], 2, /unknown command/],
    ];
    for (const [args, code, message] of cases) {
      const result = await runCli(db.databaseUrl, ...args);
      expect({ args, code: result.code }).toEqual({ args, code });
      expect(result.stderr).toMatch(message);
      expect(result.stdout).toBe("");
    }
  });

  test("413 payload_too_large over HTTP for a body above MAX_BODY_BYTES, with the envelope and a request id", async () => {
    const res = await server.fetch("/api/v1/sessions", {
      method: "POST",
      headers: { authorization: `Bearer ${defaultApp.secretKey}`, "content-type": "application/json" },
      body: JSON.stringify({ appUserId: "x".repeat(5000) }),
    });
    expect(res.status).toBe(413);
    expect(res.headers.get("x-request-id")).toMatch(UUID);
    expect(await res.json()).toEqual({ error: { code: "payload_too_large", message: expect.any(String) } });
  });

  test("errors over HTTP use the envelope and carry a request id", async () => {
    const badToken = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.";
    const bogusKey = `sk_live_${defaultApp.appId}_${"Z".repeat(32)}`;
    remember(bogusKey, badToken);
    for (const [path, init, status, code] of [
      ["/nope", {}, 404, "not_found"],
      ["/api/v1/status?appUserId=u", { bearer: bogusKey }, 401, "auth"],
      ["/api/v1/connections", { bearer: badToken }, 401, "auth"],
      ["/api/v1/connections", { bearer: defaultApp.secretKey }, 401, "auth"],
      ["/api/v1/status", { bearer: defaultApp.secretKey }, 400, "invalid_request"],
      ["/api/v1/sessions", { bearer: defaultApp.secretKey, json: { appUserId: 1 } }, 400, "invalid_request"],
    ] as const) {
      const res = await api(path, init);
      expect({ path, status: res.status, body: res.body }).toEqual({ path, status, body: { error: { code, message: expect.any(String) } } });
      expect(res.headers.get("x-request-id")).toMatch(UUID);
    }
  });

  test("SIGTERM makes the process exit 0", async () => {
    expect(await server.stop()).toBe(0);
  });

  test("no secret appears in the log: keys, their secret parts, session tokens, the JWT secret", () => {
    const store = new Database(db.path, { readonly: true });
    const jwtSecret = store.query<{ value: string }, []>("SELECT value FROM settings WHERE key = 'jwt_secret'").get()?.value;
    store.close();
    expect(jwtSecret).toBeDefined();
    // Stored sealed: the secret itself, opened with the key file beside the database, and its sealed form.
    remember(jwtSecret!);
    remember(resolveSecretBox(loadConfig({ DATABASE_URL: db.databaseUrl }), () => {}).open(jwtSecret!, sealedContext.setting("jwt_secret")));
    expect(secrets.size).toBeGreaterThan(10);

    const all = [...server.stdout, ...server.stderr];
    const logLines = all.filter((l) => l.startsWith("{"));
    expect(logLines.length).toBeGreaterThanOrEqual(2); // at least "listening" and the shutdown line
    for (const line of logLines) expect(() => JSON.parse(line)).not.toThrow();
    const leaks = logLines.flatMap((line) => [...secrets].filter((s) => line.includes(s)).map((s) => `${s.slice(0, 12)}… in ${line.slice(0, 120)}`));
    expect(leaks).toEqual([]);

    // Outside the JSON log only the one-time banner may show a secret: the default key, once.
    const bannerLeaks = all.filter((l) => !l.startsWith("{") && [...secrets].some((s) => l.includes(s)));
    expect(bannerLeaks).toEqual([`    secretKey: ${defaultApp.secretKey}`]);
  });

  test("the second start on the same database prints no key, and the default key still works", async () => {
    server = await startServer({ databaseUrl: db.databaseUrl });
    expect(server.stdout.join("\n")).not.toContain("sk_live_");
    expect(server.stdout.join("\n")).not.toMatch(/secretKey/);
    const res = await api("/api/v1/status?appUserId=u", { bearer: defaultApp.secretKey });
    expect(res.status).toBe(200);
    // Session tokens survive the restart: the generated JWT secret is kept in the store.
    const token = await mint(defaultApp.secretKey, "restart");
    expect((await api("/api/v1/connections", { bearer: token })).status).toBe(200);
    expect(await server.stop()).toBe(0);
    for (const line of [...server.stdout, ...server.stderr]) {
      for (const secret of secrets) expect(line).not.toContain(secret);
    }
  });
});

describe("configuration errors", () => {
  test("a bad PORT makes the server exit non-zero naming the key", async () => {
    const scratch = tempDatabase();
    try {
      const result = await runServerToExit({ PORT: "abc", DATABASE_URL: scratch.databaseUrl });
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain("PORT");
      expect(result.stdout).not.toContain("sk_live_"); // it stopped before creating anything
    } finally {
      scratch.cleanup();
    }
  });

  test("every bad key is named; a secret value is never echoed", async () => {
    const scratch = tempDatabase();
    try {
      const shortSecret = "too-short-jwt-secret-value";
      const result = await runServerToExit({ DATABASE_URL: scratch.databaseUrl, JWT_SECRET: shortSecret, SESSION_TTL_SECONDS: "5", MAX_MONTHLY_USD: "-1" });
      expect(result.code).not.toBe(0);
      for (const key of ["JWT_SECRET", "SESSION_TTL_SECONDS", "MAX_MONTHLY_USD"]) expect(result.stderr).toContain(key);
      expect(result.stderr + result.stdout).not.toContain(shortSecret);
    } finally {
      scratch.cleanup();
    }
  });
});
