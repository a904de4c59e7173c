/** What the numbers were measured on, and waiting for the machine to be quiet first. */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { peerGatewayVersion } from "./peer-gateway";

export interface Machine {
  cpus: number;
  cpuModel: string;
  memoryGb: number;
  kernel: string;
  bun: string;
  node: string;
  wrk: string;
  redis: string;
  /** PostgreSQL server version (arms f, g); older results have none. */
  postgres?: string;
  portkey: string;
}

const run = (argv: string[]): string => {
  try {
    const r = Bun.spawnSync(argv);
    return (r.stdout.toString() + r.stderr.toString()).trim();
  } catch {
    return "unavailable";
  }
};

export function describeMachine(): Machine {
  const cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  const meminfo = readFileSync("/proc/meminfo", "utf8");
  const memKb = Number(/^MemTotal:\s+(\d+)/m.exec(meminfo)?.[1] ?? 0);
  const portkey = peerGatewayVersion();
  return {
    cpus: Number(run(["nproc"])),
    cpuModel: /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]?.trim() ?? "unknown",
    memoryGb: Math.round((memKb / 1024 / 1024) * 10) / 10,
    kernel: run(["uname", "-sr"]),
    bun: Bun.version,
    node: run(["node", "--version"]),
    wrk: run(["wrk", "-v"]).split("\n")[0] ?? "unknown",
    redis:
      run(["redis-server", "--version"])
        .split(" ")
        .find((w) => w.startsWith("v="))
        ?.slice(2) ?? "unknown",
    postgres: postgresVersion(),
    portkey,
  };
}

/** `postgres --version` from PATH, else Debian's versioned folder (as tests/helpers/postgres.ts finds it). */
function postgresVersion(): string {
  const candidates = ["postgres"];
  try {
    const base = "/usr/lib/postgresql";
    for (const v of readdirSync(base).sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a))) candidates.push(join(base, v, "bin", "postgres"));
  } catch {
    // no Debian folder
  }
  for (const bin of candidates) {
    const version = /\(PostgreSQL\)\s+(\S+)/.exec(run([bin, "--version"]))?.[1];
    if (version) return version;
  }
  return "not installed";
}

export function loadAverage(): number {
  return Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0]);
}

/** Other test runs on this machine (they would skew every number). */
export function otherTestRuns(): number {
  const r = Bun.spawnSync(["pgrep", "-f", "bun test"]);
  return r.stdout
    .toString()
    .split("\n")
    .filter((l) => l.trim() !== "").length;
}

export interface QuietWait {
  waitedSeconds: number;
  quiet: boolean;
  loadAtStart: number;
  otherTestRunsAtStart: number;
}

/** Waits (at most `maxSeconds`) until the 1-minute load is below 0.5 and no `bun test` runs. */
export async function waitForQuiet(maxSeconds: number, log: (line: string) => void): Promise<QuietWait> {
  const t0 = Date.now();
  const loadAtStart = loadAverage();
  const otherTestRunsAtStart = otherTestRuns();
  for (;;) {
    const load = loadAverage();
    const others = otherTestRuns();
    if (load < 0.5 && others === 0) return { waitedSeconds: Math.round((Date.now() - t0) / 1000), quiet: true, loadAtStart, otherTestRunsAtStart };
    if (Date.now() - t0 >= maxSeconds * 1000) {
      log(`machine not quiet after ${maxSeconds} s (load ${load}, ${others} other test runs): running anyway`);
      return { waitedSeconds: Math.round((Date.now() - t0) / 1000), quiet: false, loadAtStart, otherTestRunsAtStart };
    }
    log(`waiting for a quiet machine: load ${load}, ${others} other test runs`);
    await Bun.sleep(Math.min(15_000, Math.max(1000, maxSeconds * 1000 - (Date.now() - t0))));
  }
}
