/**
 * A durable PostgreSQL for the benchmarks (tests/helpers/postgres.ts with fsync on: the
 * honest setting), pinned like redis-server: the postmaster and every process it has
 * forked are moved to one core with `taskset -a -p`, and backends forked later inherit it.
 * Also: the CPU the whole server uses (postmaster, live children, reaped children).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pgBinary, startPostgres, type TestPostgres } from "../../../tests/helpers/postgres";
import { pin } from "./proc";

export interface BenchPostgres {
  pg: TestPostgres;
  /** The postmaster (the server's parent process). */
  pid: number;
  version: string;
  createDatabase(name?: string): Promise<string>;
  /** CPU seconds used so far by the postmaster and all its children, live or exited. */
  cpuSeconds(): number;
  /** Pins the postmaster and its current children again (a restarted backend inherits it anyway). */
  pin(): void;
  stop(): Promise<void>;
}

/** `core` null: not pinned. */
export async function startBenchPostgres(core: number | null): Promise<BenchPostgres> {
  const pg = await startPostgres({ fsync: true });
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
    stop: async () => {
      if (stopped) return;
      stopped = true;
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
