/**
 * A real PostgreSQL server for tests: its own cluster in a temp folder, on a free port, with
 * trust auth and a superuser `proxy`. stop()/start() keep the data (a restart test), and
 * fsync is off unless asked for, because tests do not survive power loss anyway.
 */
import type { Subprocess } from "bun";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { freePort } from "./server";

export interface TestPostgres {
  url: string;
  port: number;
  dataDir: string;
  /** Fast shutdown (SIGINT); the data stays. */
  stop(): Promise<void>;
  /**
   * A crash: `pg_ctl stop -m immediate` (every server process quits at once, no checkpoint,
   * WAL not yet written is lost); the next start() recovers from the WAL.
   */
  crash(): Promise<void>;
  /** Starts it again on the same port and data dir. */
  start(): Promise<void>;
  /** Creates a fresh empty database (a unique name unless one is given); returns its postgres:// url. */
  createDatabase(name?: string): Promise<string>;
  /** Stops the server and removes its folder. */
  destroy(): Promise<void>;
}

/** A Postgres binary: PATH first, else Debian's versioned folder (its package keeps them off PATH). */
export function pgBinary(name: "initdb" | "postgres" | "pg_ctl"): string | null {
  const onPath = Bun.which(name);
  if (onPath) return onPath;
  const base = "/usr/lib/postgresql";
  if (!existsSync(base)) return null;
  const versions = readdirSync(base)
    .filter((v) => existsSync(join(base, v, "bin", name)))
    .sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a));
  return versions[0] ? join(base, versions[0], "bin", name) : null;
}

function run(argv: string[]): string {
  const r = Bun.spawnSync(argv, { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`${argv.join(" ")} failed (${r.exitCode}): ${r.stderr.toString().trim()}`);
  return r.stdout.toString().trim();
}

/**
 * initdb and postgres refuse to run as root, so as root they run as `postgres` (Debian's
 * package creates it) or a system user we create. Returns the argv prefix that switches to it.
 * setpriv is preferred over runuser: it execs in place (runuser forks and turns signals into
 * SIGTERM-then-SIGKILL) and its --pdeathsig stops the server if the test process dies hard.
 */
export function userPrefix(root: string): string[] {
  const setpriv = Bun.which("setpriv");
  const deathSig = setpriv ? [setpriv, "--pdeathsig", "SIGINT"] : [];
  if (process.getuid?.() !== 0) return deathSig.length ? [...deathSig, "--"] : [];
  let user = "postgres";
  if (Bun.spawnSync(["id", "-u", user]).exitCode !== 0) {
    user = "proxytest";
    if (Bun.spawnSync(["id", "-u", user]).exitCode !== 0) run(["useradd", "--system", "--no-create-home", user]);
  }
  run(["chown", "-R", `${user}:`, root]);
  if (!setpriv) return ["runuser", "-u", user, "--"];
  const uid = run(["id", "-u", user]);
  const gid = run(["id", "-g", user]);
  return [...deathSig, "--reuid", uid, "--regid", gid, "--init-groups", "--"];
}

export interface PostgresOptions {
  /** fsync on, as on a production server (off by default: tests do not survive power loss anyway). */
  fsync?: boolean;
  /**
   * Commits wait for their WAL to be written (synchronous_commit on, the server's default),
   * with fsync still off unless asked: what a process crash of PostgreSQL cannot undo.
   * Off by default, like fsync.
   */
  durableCommits?: boolean;
  /** More server settings, `name=value` each. */
  settings?: string[];
}

export async function startPostgres(options: PostgresOptions = {}): Promise<TestPostgres> {
  const initdb = pgBinary("initdb");
  const server = pgBinary("postgres");
  if (!initdb || !server) throw new Error("PostgreSQL not found: install Debian's `postgresql` package (npm test does)");
  const root = mkdtempSync(join(tmpdir(), "proxy-pg-"));
  const dataDir = join(root, "data");
  const socketDir = join(root, "sock");
  mkdirSync(socketDir);
  const port = freePort();
  const asUser = userPrefix(root);
  run([...asUser, initdb, "-D", dataDir, "-U", "proxy", "--auth=trust", "-E", "UTF8", "--no-locale"]);

  const durability = [
    ...(options.fsync ? [] : ["-c", "fsync=off", "-c", "full_page_writes=off"]),
    ...(options.fsync || options.durableCommits ? [] : ["-c", "synchronous_commit=off"]),
    ...(options.settings ?? []).flatMap((setting) => ["-c", setting]),
  ];
  let proc: Subprocess<"ignore", "ignore", "pipe"> | null = null;
  let postmasterPid = 0;
  const stderrTail: string[] = [];

  const start = async () => {
    if (proc) return;
    stderrTail.length = 0;
    proc = Bun.spawn(
      [...asUser, server, "-D", dataDir, "-p", String(port), "-k", socketDir, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", ...durability],
      { stdin: "ignore", stdout: "ignore", stderr: "pipe" },
    );
    // postgres logs to stderr; keep reading so a full pipe never blocks it, and keep a tail for errors.
    const drained = drain(proc.stderr, stderrTail);
    await waitReady(port, proc, drained, stderrTail);
    // Signal the postmaster itself, not a wrapper (runuser would forward it as SIGTERM).
    postmasterPid = Number(readFileSync(join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
  };
  const stop = async () => {
    if (!proc) return;
    const exited = proc.exited;
    try {
      process.kill(postmasterPid || proc.pid, "SIGINT");
    } catch {
      // already gone
    }
    await exited;
    proc = null;
    postmasterPid = 0;
  };
  const crash = async () => {
    if (!proc) return;
    const exited = proc.exited;
    run([...asUser, pgBinary("pg_ctl")!, "stop", "-D", dataDir, "-m", "immediate", "-w"]);
    await exited;
    proc = null;
    postmasterPid = 0;
  };
  // A test file that forgets destroy() or throws must not leave a server behind.
  // The event loop is gone by then, so: immediate shutdown, a short synchronous wait, remove.
  const onExit = () => {
    if (!proc) return;
    const pid = postmasterPid || proc.pid;
    try {
      process.kill(pid, "SIGQUIT");
    } catch {
      // already gone
    }
    for (let waited = 0; waited < 3000 && running(pid); waited += 10) Bun.sleepSync(10);
    try {
      rmSync(root, { recursive: true, force: true });
    } catch {
      // still being written to; the OS cleans tmp eventually
    }
  };
  process.on("exit", onExit);

  const createDatabase = async (name = `t_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`) => {
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`not a plain database name: ${name}`);
    const admin = new SQL(`postgres://proxy@127.0.0.1:${port}/postgres`, { max: 1 });
    try {
      await admin.unsafe(`CREATE DATABASE "${name}"`);
    } finally {
      await admin.close({ timeout: 0 });
    }
    return `postgres://proxy@127.0.0.1:${port}/${name}`;
  };
  const destroy = async () => {
    await stop();
    process.off("exit", onExit);
    rmSync(root, { recursive: true, force: true });
  };

  try {
    await start();
  } catch (err) {
    await destroy();
    throw err;
  }
  return { url: `postgres://proxy@127.0.0.1:${port}/postgres`, port, dataDir, start, stop, crash, createDatabase, destroy };
}

/** Alive and not a zombie (our own child stays a zombie: nothing reaps it during exit). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

async function drain(stream: ReadableStream<Uint8Array>, tail: string[]): Promise<void> {
  const decoder = new TextDecoder();
  for await (const chunk of stream) {
    tail.push(...decoder.decode(chunk, { stream: true }).split("\n").filter(Boolean));
    if (tail.length > 40) tail.splice(0, tail.length - 40);
  }
}

/** Ready means a real query answers, not just an open port (postgres accepts during recovery). */
async function waitReady(port: number, proc: Subprocess, drained: Promise<void>, stderrTail: string[]): Promise<void> {
  const deadline = Date.now() + 20_000;
  let lastError: unknown;
  while (Date.now() < deadline && proc.exitCode === null && proc.signalCode === null) {
    const probe = new SQL(`postgres://proxy@127.0.0.1:${port}/postgres`, { max: 1, connectionTimeout: 2 });
    try {
      await probe`select 1`;
      return;
    } catch (err) {
      lastError = err;
    } finally {
      await probe.close({ timeout: 0 });
    }
    await Bun.sleep(50);
  }
  const exited = proc.exitCode !== null || proc.signalCode !== null;
  const why = exited ? `exited (${proc.exitCode ?? proc.signalCode})` : "did not answer within 20 s";
  if (!exited) proc.kill("SIGKILL");
  // Let the last of stderr arrive: it usually says why (a bad setting, a port in use).
  await Promise.race([drained, Bun.sleep(500)]);
  throw new Error(`postgres on port ${port} ${why}: ${String(lastError)}\n${stderrTail.slice(-15).join("\n")}`);
}
