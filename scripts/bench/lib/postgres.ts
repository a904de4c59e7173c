/**
 * A durable PostgreSQL for the benchmarks (tests/helpers/postgres.ts with fsync on: the
 * honest setting), pinned like redis-server: the postmaster and every process it has
 * forked are moved to one core with `taskset -a -p`, and backends forked later inherit it.
 * Also: the CPU the whole server uses (postmaster, live children, reaped children), and,
 * when asked for, the statements the server ran (pg_stat_statements): the round trips.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SQL } from "bun";
import { pgBinary, startPostgres, type TestPostgres } from "../../../tests/helpers/postgres";
import { pin } from "./proc";

export interface BenchPostgres {
  pg: TestPostgres;
  /** The postmaster (the server's parent process). */
  readonly pid: number;
  version: string;
  createDatabase(name?: string): Promise<string>;
  /** CPU seconds used so far by the postmaster and all its children, live or exited. */
  cpuSeconds(): number;
  /** Pins the postmaster and its current children again (a restarted backend inherits it anyway). */
  pin(): void;
  /** The postmaster and its children of the moment (its backends, once the service has connected). */
  pids(): number[];
  /**
   * With `statements`: top-level statements run since the last call (each a round trip from
   * a client), by query text, and resets the count. Throws without it.
   */
  statementsSinceLast(): Promise<StatementCounts>;
  stop(): Promise<void>;
}

export interface StatementCounts {
  total: number;
  byQuery: Array<{ query: string; calls: number }>;
}

/**
 * `core` null: not pinned. `statements`: load pg_stat_statements (a restart), which counts
 * every statement a client sends as it ends; it costs the server a little CPU per
 * statement, so only the runs that count round trips ask for it.
 */
export async function startBenchPostgres(core: number | null, options: { statements?: boolean } = {}): Promise<BenchPostgres> {
  const pg = await startPostgres({ fsync: true });
  let counter: SQL | null = null;
  if (options.statements) {
    const admin = new SQL(pg.url, { max: 1 });
    await admin`ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`;
    await admin.close({ timeout: 0 });
    await pg.stop();
    await pg.start();
    counter = new SQL(pg.url, { max: 1 });
    await counter`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`;
    await counter`SELECT pg_stat_statements_reset()`;
  }
  const pid = Number(readFileSync(join(pg.dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
  const pinAll = () => {
    if (core === null) return;
    for (const p of [pid, ...childrenOf(pid)]) {
      try {
        pin(p, core);
      } catch {
        // a child that exited between listing and pinning
      }
    }
  };
  pinAll();
  const versionLine = Bun.spawnSync([pgBinary("postgres")!, "--version"])
    .stdout.toString()
    .trim();
  let stopped = false;
  return {
    pg,
    pid,
    version: /\(PostgreSQL\)\s+(\S+)/.exec(versionLine)?.[1] ?? (versionLine || "unknown"),
    createDatabase: (name) => pg.createDatabase(name),
    cpuSeconds: () => treeCpuSeconds(pid),
    pin: pinAll,
    pids: () => [pid, ...childrenOf(pid)],
    statementsSinceLast: async () => {
      if (!counter) throw new Error("started without { statements: true }");
      // Its own statements (this one, the reset) are left out by their text.
      const rows: Array<{ query: string; calls: string }> =
        await counter`SELECT query, calls FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' AND toplevel ORDER BY calls DESC`;
      await counter`SELECT pg_stat_statements_reset()`;
      const byQuery = rows.map((r) => ({ query: r.query.replace(/\s+/g, " ").slice(0, 160), calls: Number(r.calls) }));
      return { total: byQuery.reduce((sum, q) => sum + q.calls, 0), byQuery };
    },
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await counter?.close({ timeout: 0 });
      await pg.destroy();
    },
  };
}

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    const r = Bun.spawnSync(["pgrep", "-P", String(pid)]);
    return r.stdout
      .toString()
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map(Number);
  }
}

/** utime + stime + cutime + cstime: the process and its reaped children. */
function withReapedChildren(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}
const CLOCK_TICKS = Number(Bun.spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim()) || 100;

/** A backend that exits moves its time into the postmaster's cutime: the sum stays whole. */
export function treeCpuSeconds(pid: number): number {
  return withReapedChildren(pid) + childrenOf(pid).reduce((sum, child) => sum + withReapedChildren(child), 0);
}
