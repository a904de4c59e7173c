/**
 * Embedded mode owns its SQLite file: budgets live in the serving process's memory, so a
 * second process on the same file would double every cap. The second one must exit
 * non-zero naming the lock (`<file>.lock`) while the first keeps serving; a SIGKILLed owner
 * must leave no stale lock; the operator CLI must keep working beside a running server;
 * `sqlite::memory:` stores are private and take no lock. With REDIS_URL several processes
 * share one file, but never one port.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readLines } from "../../scripts/lib/read-lines";
import { startRedis, type TestRedis } from "../helpers/redis";
import { cliCreateApp, freePort, REPO_ROOT, serviceCommand, startServer, tempDatabase, type RunningServer } from "../helpers/server";

/** The exit code src/launch/startup-failure.ts documents for "another process holds this store". */
const EXIT_STORE_LOCKED = 3;

interface Attempt {
  /** The exit code, or null when the process got as far as listening (it was then killed). */
  code: number | null;
  listened: boolean;
  output: string;
}

/**
 * Starts one more service process (the bundle, as `npm start` runs it) on `databaseUrl` and `port`, and waits for whichever
 * comes first: it exits, or it logs "listening" (then it is killed and `listened` is true).
 * Decided by the process's own output, not by a deadline or by probing a port another
 * process may also answer on.
 */
async function startAnother(databaseUrl: string, port: number, env: Record<string, string> = {}): Promise<Attempt> {
  const proc = Bun.spawn(await serviceCommand(), {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      TMPDIR: process.env.TMPDIR ?? "/tmp",
      PORT: String(port),
      HOST: "127.0.0.1",
      DATABASE_URL: databaseUrl,
      ...env,
    },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const lines: string[] = [];
  let onListening!: () => void;
  const listening = new Promise<"listening">((resolve) => (onListening = () => resolve("listening")));
  const collect = (batch: string[]) => {
    lines.push(...batch);
    if (batch.some((l) => l.startsWith("{") && (JSON.parse(l) as { msg?: string }).msg === "listening")) onListening();
  };
  const drained = Promise.all([readLines(proc.stdout, collect), readLines(proc.stderr, collect)]);
  const first = await Promise.race([proc.exited.then(() => "exited" as const), listening]);
  if (first === "listening") proc.kill("SIGKILL");
  await proc.exited;
  await drained;
  return { code: first === "listening" ? null : proc.exitCode, listened: first === "listening", output: lines.join("\n") };
}

/** Refused in one plain line that names the lock, the database and the ways out; nothing else printed. */
function expectRefused(attempt: Attempt, databasePath: string): void {
  expect({ code: attempt.code, listened: attempt.listened }).toEqual({ code: EXIT_STORE_LOCKED, listened: false });
  const lines = attempt.output.trimEnd().split("\n");
  expect(lines).toHaveLength(1);
  expect(lines[0]).toStartWith(`cannot start: store is locked: another process holds the lock file ${databasePath}.lock of the database ${databasePath}.`);
  expect(lines[0]).toContain("Stop the other process");
  expect(lines[0]).toContain("REDIS_URL");
}

async function chatOnce(server: RunningServer, secretKey: string, appUserId: string): Promise<Response> {
  const auth = { authorization: `Bearer ${secretKey}`, "content-type": "application/json" };
  const minted = await server.fetch("/api/v1/sessions", {
    method: "POST",
    headers: auth,
    body: JSON.stringify({ appUserId, requestLimit: { monthlyUsd: 1 } }),
  });
  expect(minted.status).toBe(200);
  const { token } = (await minted.json()) as { token: string };
  expect((await server.fetch("/api/v1/connections", { method: "POST", headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
  return server.fetch("/api/v1/chat/completions", {
    method: "POST",
    headers: { ...auth, "x-service-user": appUserId },
    body: JSON.stringify({ model: "openai/gpt-4o-mini", max_tokens: 16, messages: [{ role: "user", content: "hello" }] }),
  });
}

describe("a second process on the same embedded store", () => {
  const db = tempDatabase();
  let first: RunningServer;
  let app: { secretKey: string };

  beforeAll(async () => {
    first = await startServer({ databaseUrl: db.databaseUrl });
    app = await cliCreateApp(db.databaseUrl, "lock test");
  });

  afterAll(async () => {
    await first?.stop();
    db.cleanup();
  });

  test("on the same port: exits 1 naming the port in use (the likelier mistake), before listening; the first keeps serving", async () => {
    const second = await startAnother(db.databaseUrl, first.port);
    expect({ code: second.code, listened: second.listened }).toEqual({ code: 1, listened: false });
    expect(second.output.trimEnd().split("\n")).toEqual([
      `cannot start: port ${first.port} is in use on 127.0.0.1 (EADDRINUSE): another process listens there. Stop it, or set PORT to a free port.`,
    ]);
    expect((await first.fetch("/healthz")).status).toBe(200);
    const chat = await chatOnce(first, app.secretKey, "after-same-port");
    expect(chat.status).toBe(200);
    expect(((await chat.json()) as { choices: unknown[] }).choices).toHaveLength(1);
  });

  test("on another port: exits non-zero naming the lock; the first keeps serving", async () => {
    const second = await startAnother(db.databaseUrl, freePort());
    expectRefused(second, db.path);
    expect((await first.fetch("/healthz")).status).toBe(200);
    const chat = await chatOnce(first, app.secretKey, "after-other-port");
    expect(chat.status).toBe(200);
  });

  test("the operator CLI works against the same file while the server holds the lock", async () => {
    const created = await cliCreateApp(db.databaseUrl, "while serving");
    // The running server sees the new app without a restart.
    expect((await chatOnce(first, created.secretKey, "cli-user")).status).toBe(200);
    // ...and the lock is still in force after the CLI came and went.
    expectRefused(await startAnother(db.databaseUrl, freePort()), db.path);
  });
});

describe("a SIGKILLed owner", () => {
  const db = tempDatabase();
  let server: RunningServer | undefined;

  afterAll(async () => {
    await server?.stop();
    db.cleanup();
  });

  test("leaves no stale lock: a new process on the same file starts, and then owns the file in turn", async () => {
    const killed = await startServer({ databaseUrl: db.databaseUrl });
    const app = await cliCreateApp(db.databaseUrl, "survivor");
    expectRefused(await startAnother(db.databaseUrl, freePort()), db.path);

    killed.proc.kill("SIGKILL");
    await killed.proc.exited;
    expect(killed.proc.signalCode).toBe("SIGKILL");

    server = await startServer({ databaseUrl: db.databaseUrl });
    expect((await chatOnce(server, app.secretKey, "after-kill")).status).toBe(200);
    expectRefused(await startAnother(db.databaseUrl, freePort()), db.path);
  });
});

describe("a private in-memory store", () => {
  const db = tempDatabase();
  const servers: RunningServer[] = [];

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    db.cleanup();
  });

  test("takes no lock: two sqlite::memory: processes on different ports both serve (a file store refuses the second)", async () => {
    servers.push(await startServer({ databaseUrl: "sqlite::memory:" }));
    servers.push(await startServer({ databaseUrl: "sqlite::memory:" }));
    for (const server of servers) expect((await server.fetch("/healthz")).status).toBe(200);
    expect(servers[0]!.port).not.toBe(servers[1]!.port);

    // The contrast that makes the exemption mean something: the same pair on a file.
    servers.push(await startServer({ databaseUrl: db.databaseUrl }));
    expectRefused(await startAnother(db.databaseUrl, freePort()), db.path);
  });
});

describe("scale-out with REDIS_URL", () => {
  const db = tempDatabase();
  let redis: TestRedis;
  let first: RunningServer | undefined;

  beforeAll(async () => {
    redis = await startRedis();
  });

  afterAll(async () => {
    await first?.stop();
    await redis?.stop();
    db.cleanup();
  });

  test("takes no lock, but never shares a port: a second process on the first's port fails to bind; on another port it serves", async () => {
    await cliCreateApp(db.databaseUrl, "scale-out");
    first = await startServer({ databaseUrl: db.databaseUrl, env: { REDIS_URL: redis.url } });

    // Elysia's listen() would set SO_REUSEPORT and let this one bind beside the first.
    const samePort = await startAnother(db.databaseUrl, first.port, { REDIS_URL: redis.url });
    expect(samePort.listened).toBe(false);
    expect(samePort.code).toBe(1);
    // One plain line, not the bundle's minified source around a stack trace, and before the store is opened.
    expect(samePort.output.trimEnd().split("\n")).toEqual([
      `cannot start: port ${first.port} is in use on 127.0.0.1 (EADDRINUSE): another process listens there. Stop it, or set PORT to a free port.`,
    ]);
    expect(samePort.output).not.toContain(".lock");

    const otherPort = await startAnother(db.databaseUrl, freePort(), { REDIS_URL: redis.url });
    expect(otherPort.listened).toBe(true);
    expect((await first.fetch("/healthz")).status).toBe(200);
  });
});
