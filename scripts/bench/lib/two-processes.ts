/**
 * Arm (g2): two service processes sharing one Redis and one PostgreSQL, against one of them
 * alone, in alternating rounds on the same two running processes and the same database,
 * each pair in the other order from the last (./in-turns.ts).
 *
 * The loader is two wrk processes of c/2 connections each, in both layouts: one process
 * gets both of them, or each process gets one. So the loader, the stores and the users are
 * the same on both sides, and only the number of service processes differs.
 *
 * Both service processes run on the core the single one has (core 1), not one per core:
 * this machine has two cores and core 0 already carries wrk, the upstream, Redis and
 * PostgreSQL, so a process there would take its CPU from the stores it depends on and
 * measure that contention, not scaling. On one core the comparison is at equal CPU for
 * the service: it shows what sharing the stores between processes costs (their own
 * connections, leases, contention on the same rows), which is what "two processes serve
 * no fewer calls/s than one" asks; scaling across cores is what the sizing table is for.
 */
import { CoreTimeMeter, type CoreShares } from "./core-time";
import { pairInTurns } from "./in-turns";
import { runWrk, type WrkOptions, type WrkResult } from "./wrk";

export interface TwoProcessesSide {
  /** Calls/s summed over both wrk processes. */
  rps: number;
  /** 2xx responses, both wrk processes. */
  ok: number;
  errors: number;
  /** The larger of the two wrk processes' p99 under load. */
  p99Us: number;
  /** Calls/s each service process served (one layout: the second is idle, 0). */
  perProcessRps: [number, number];
  /**
   * CPU µs per call of each component over the round (the calls the upstream served in
   * it): where a difference between the layouts comes from ("sut" is both processes).
   */
  cpuUsPerCall: Record<string, number>;
  /** How the processes' core was shared over the round (null: not measured), as in lib/many-users.ts. */
  sutCore?: CoreShares | null;
}

export interface TwoProcessesRun {
  shape: "json" | "sse";
  connections: number;
  users: number;
  rounds: Array<{ one: TwoProcessesSide; two: TwoProcessesSide }>;
  /** 2xx responses over the warm-up and every round. */
  completed: number;
  /** Mean calls/s of two processes over mean calls/s of one (target ≥ 1.0). */
  rpsRatio: number;
}

type Load = Omit<WrkOptions, "seconds" | "connections" | "url">;

/** CPU seconds so far of each component, and the calls the upstream has served so far. */
export interface Meters {
  cpu(): Record<string, number>;
  served(): Promise<number>;
}

async function both(
  urls: [string, string],
  load: Load,
  connections: number,
  seconds: number,
  meters: Meters,
  sutCore: number | null,
  run: typeof runWrk,
): Promise<TwoProcessesSide> {
  const half = Math.max(1, Math.round(connections / 2));
  const servedBefore = await meters.served();
  const cpuBefore = meters.cpu();
  const core = sutCore === null ? null : new CoreTimeMeter(sutCore);
  const runs: WrkResult[] = await Promise.all(urls.map((url) => run({ ...load, url, connections: half, seconds })));
  const shares = core?.read() ?? null;
  const cpuAfter = meters.cpu();
  const calls = (await meters.served()) - servedBefore;
  const [first, second] = runs as [WrkResult, WrkResult];
  const sameProcess = urls[0] === urls[1];
  return {
    rps: first.rps + second.rps,
    ok: first.ok + second.ok,
    errors: first.errors + second.errors,
    p99Us: Math.max(first.latencyUs.p99, second.latencyUs.p99),
    perProcessRps: sameProcess ? [first.rps + second.rps, 0] : [first.rps, second.rps],
    cpuUsPerCall: Object.fromEntries(Object.keys(cpuAfter).map((name) => [name, ((cpuAfter[name]! - cpuBefore[name]!) * 1e6) / calls])),
    sutCore: shares,
  };
}

export async function twoProcessRounds(o: {
  /** The chat URL of each service process. */
  urls: [string, string];
  load: Load;
  shape: "json" | "sse";
  connections: number;
  rounds: number;
  seconds: number;
  warmupSeconds: number;
  meters: Meters;
  /** The core both processes run on, to record each round's steal (null when they have a core each). */
  sutCore?: number | null;
  /** What runs each wrk: wrk, unless a test stands in for it. */
  runWrk?: typeof runWrk;
}): Promise<TwoProcessesRun> {
  const sutCore = o.sutCore ?? null;
  const run = o.runWrk ?? runWrk;
  const warm = await both(o.urls, o.load, o.connections, o.warmupSeconds, o.meters, null, run);
  const rounds: TwoProcessesRun["rounds"] = [];
  for (let i = 0; i < o.rounds; i++) {
    const layout = (urls: [string, string]) => () => both(urls, o.load, o.connections, o.seconds, o.meters, sutCore, run);
    const [one, two] = await pairInTurns(i, layout([o.urls[0], o.urls[0]]), layout(o.urls));
    rounds.push({ one, two });
  }
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  return {
    shape: o.shape,
    connections: o.connections,
    users: o.load.users?.count ?? 1,
    rounds,
    completed: warm.ok + rounds.reduce((sum, r) => sum + r.one.ok + r.two.ok, 0),
    rpsRatio: mean(rounds.map((r) => r.two.rps)) / mean(rounds.map((r) => r.one.rps)),
  };
}
