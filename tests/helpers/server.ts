/**
 * Real server processes for end-to-end tests: the service as `npm start` runs it (the
 * bundle, dist/server/index.js, built once per test run from the current source, with Bun's
 * runtime settings), on a free port with its own temp-dir SQLite file; and the operator CLI
 * as `npm run cli` runs it (`bun src/cli.ts`) against the same DATABASE_URL. Output is
 * captured line by line so tests can scan what the process printed.
 *
 * The bundle, not the source: what users run is minified (scripts/bundle.ts), and a bug
 * only the bundle has (one did: handlers whose async-ness minification hid from Elysia)
 * must fail a test.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { readLines } from "../../scripts/lib/read-lines";
import { freePort } from "../../scripts/lib/free-port";
import { bundleService, SERVER_BUNDLE_DIR } from "../../scripts/bundle";
import { RUNTIME_ENV } from "../../scripts/runtime-env";

/** Each port once per test process (scripts/lib/free-port.ts). */
export { freePort };

export const REPO_ROOT = resolve(import.meta.dir, "../..");

let bundled: Promise<string> | undefined;

/** The path of the service's bundle, built from the current source on first use in this test process. */
export function serviceBundle(): Promise<string> {
  return (bundled ??= bundleService(join(REPO_ROOT, "src/index.ts"), join(REPO_ROOT, SERVER_BUNDLE_DIR)));
}

/** The command `npm start` ends in: Bun on the bundle. */
export async function serviceCommand(): Promise<string[]> {
  return [process.execPath, await serviceBundle()];
}

/** A fresh temp dir with the DATABASE_URL of a (not yet existing) SQLite file inside a missing sub-folder. */
export function tempDatabase(): { dir: string; databaseUrl: string; path: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), "proxy-e2e-"));
  const path = join(dir, "data", "proxy.sqlite");
  return { dir, path, databaseUrl: `sqlite:${path}`, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The environment a child gets: only what it needs, never the test runner's own settings.
 * Demo mode's streams run unpaced, at full speed, unless a test asks for the pace (an empty
 * value: the service's default).
 */
function childEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = { ...RUNTIME_ENV, DEMO_STREAM_TOKENS_PER_SECOND: "0" };
  for (const key of ["PATH", "HOME", "TMPDIR"]) {
    const value = process.env[key];
    if (value !== undefined) env[key] = value;
  }
  return { ...env, ...extra };
}

/** Collects a stream's text into `lines` (complete lines only, plus the tail at the end). */
function collectLines(stream: ReadableStream<Uint8Array>, lines: string[]): Promise<void> {
  return readLines(stream, (batch) => lines.push(...batch));
}

export interface RunningServer {
  baseUrl: string;
  port: number;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  stdout: string[];
  stderr: string[];
  /** stdout lines that are JSON objects: the logger's output. */
  logLines(): Array<Record<string, unknown>>;
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** SIGTERM, then the exit code once the process has exited and its output is drained. */
  stop(): Promise<number>;
}

export interface StartOptions {
  databaseUrl: string;
  env?: Record<string, string>;
  /** What to run instead of the bundle (serviceCommand), e.g. the single binary. */
  command?: string[];
}

/** Starts the service (the bundle, unless `command` says otherwise) and resolves once GET /healthz answers 200. */
export async function startServer(opts: StartOptions): Promise<RunningServer> {
  const command = opts.command ?? (await serviceCommand());
  const port = freePort();
  const proc = Bun.spawn(command, {
    cwd: REPO_ROOT,
    // PUBLIC_URL is the address tests reach it at (baseUrl below), so a PKCE flow started from a
    // page served there comes back to the same host, where its cookie was set.
    env: childEnv({ PORT: String(port), HOST: "127.0.0.1", PUBLIC_URL: `http://127.0.0.1:${port}`, DATABASE_URL: opts.databaseUrl, ...opts.env }),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const stdout: string[] = [];
  const stderr: string[] = [];
  const drained = Promise.all([collectLines(proc.stdout, stdout), collectLines(proc.stderr, stderr)]);
  const baseUrl = `http://127.0.0.1:${port}`;
  const server: RunningServer = {
    baseUrl,
    port,
    proc,
    stdout,
    stderr,
    logLines: () => stdout.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>),
    fetch: (path, init) => fetch(baseUrl + path, init),
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      const code = await proc.exited;
      await drained;
      return code;
    },
  };
  await waitForHealth(server, drained);
  return server;
}

async function waitForHealth(server: RunningServer, drained: Promise<unknown>): Promise<void> {
  // Bounded by the test timeout (npm test passes --timeout), not by a guess of how fast a machine is.
  for (;;) {
    if (server.proc.exitCode !== null || server.proc.signalCode !== null) {
      await drained;
      throw new Error(
        `server exited with ${server.proc.exitCode ?? server.proc.signalCode} before it was healthy:\n` + [...server.stdout, ...server.stderr].join("\n"),
      );
    }
    try {
      const res = await server.fetch("/healthz");
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await Bun.sleep(50);
  }
}

/** Runs the service (the bundle) expecting it to exit by itself (e.g. a configuration error). */
export async function runServerToExit(env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn(await serviceCommand(), { cwd: REPO_ROOT, env: childEnv(env), stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
  /** Each stdout line parsed as JSON. */
  json: Array<Record<string, any>>;
}

/** Runs the operator CLI (`bun src/cli.ts ...args`) against `databaseUrl`. */
export function runCli(databaseUrl: string, ...args: string[]): Promise<CliResult> {
  return runCliWithEnv({ DATABASE_URL: databaseUrl }, ...args);
}

/** Runs the operator CLI with `env` (DATABASE_URL and any other settings). */
export async function runCliWithEnv(env: Record<string, string>, ...args: string[]): Promise<CliResult> {
  const proc = Bun.spawn([process.execPath, "src/cli.ts", ...args], {
    cwd: REPO_ROOT,
    env: childEnv(env),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  // Commands print JSON lines; --help prints text, which has no JSON to read.
  // Whatever the exit status (`usage reconcile` prints its differences and exits 3).
  const json = stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, any>);
  return { code, stdout, stderr, json };
}

/** `app create` through the CLI; throws unless it printed exactly one JSON line. */
export async function cliCreateApp(
  databaseUrl: string,
  name: string,
  origins: string[] = [],
): Promise<{ appId: string; secretKey: string; keyId: string; name: string; origins: string[] }> {
  const result = await runCli(databaseUrl, "app", "create", "--name", name, ...origins.flatMap((o) => ["--origin", o]));
  if (result.code !== 0 || result.json.length !== 1) throw new Error(`app create failed: ${result.code} ${result.stdout} ${result.stderr}`);
  return result.json[0] as { appId: string; secretKey: string; keyId: string; name: string; origins: string[] };
}

/**
 * Connects a user the way an app does over HTTP: the backend mints a session with its
 * secret key (POST /sessions), the browser approves the cap with it (POST /connections).
 */
export async function connectOverHttp(server: Pick<RunningServer, "fetch">, secretKey: string, appUserId: string, monthlyUsd: number): Promise<void> {
  const session = await server.fetch("/api/v1/sessions", {
    method: "POST",
    headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/json" },
    body: JSON.stringify({ appUserId }),
  });
  if (session.status !== 200) throw new Error(`POST /sessions: ${session.status} ${await session.text()}`);
  const { token } = (await session.json()) as { token: string };
  const approved = await server.fetch("/api/v1/connections", {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ monthlyUsd }),
  });
  if (approved.status !== 200) throw new Error(`POST /connections: ${approved.status} ${await approved.text()}`);
}
