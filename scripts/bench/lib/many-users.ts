/**
 * Issue 35's "many users": the same arm at the same concurrency, with every call for one
 * user and with the calls spread round-robin over N connected users (each its own budget
 * account, rate-limit key and ledger rows), in alternating rounds on the same process so
 * that the host's drift falls on both sides alike.
 */
import { CoreTimeMeter, type CoreShares } from "./core-time";
import { runWrk, type WrkOptions, type WrkResult } from "./wrk";

type RoundSide = Pick<WrkResult, "rps" | "ok" | "errors" | "latencyUs"> & {
  /** How the core of the process under test was shared during the round (null: not known). */
  sutCore?: CoreShares | null;
};

export interface UsersRound {
  one: RoundSide;
  many: RoundSide;
}

export interface ManyUsersRun {
  shape: "json" | "sse";
  connections: number;
  users: number;
  /**
   * The warm-up: one call for every user (their first in this process: each account is
   * loaded, and its first row of the period written), at the same concurrency.
   */
  firstCalls: Omit<RoundSide, "sutCore"> & { calls: number };
  rounds: UsersRound[];
  /** 2xx responses over the warm-up and every round. */
  completed: number;
  /** Mean calls/s with many users over mean calls/s with one (target ≥ 0.95). */
  rpsRatio: number;
  /** Mean p99 under load with many users over the same with one (target ≤ 1.2). */
  p99Ratio: number;
  /**
   * `rpsRatio` with each round's calls/s counted over the time the hypervisor left the
   * core (calls/s ÷ (1 − its steal)): context for a ratio that a burst of steal moved, not
   * the target. Null when the core's steal is not known.
   */
  rpsRatioUnstolen?: number | null;
}

const keep = (r: WrkResult): RoundSide => ({ rps: r.rps, ok: r.ok, errors: r.errors, latencyUs: r.latencyUs });
const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

/** One wrk run, with how `sutCore` was shared meanwhile when it is given. */
async function measuredRound(options: WrkOptions, sutCore: number | null): Promise<RoundSide> {
  const meter = sutCore === null ? null : new CoreTimeMeter(sutCore);
  const result = await runWrk(options);
  return { ...keep(result), sutCore: meter?.read() ?? null };
}

/** Calls/s over the core's time not stolen; null when a round's steal is not known. */
export function unstolenRatio(rounds: UsersRound[]): number | null {
  const unstolen = (side: RoundSide) => (side.sutCore ? side.rps / (1 - side.sutCore.stolen) : NaN);
  const ratio = mean(rounds.map((r) => unstolen(r.many))) / mean(rounds.map((r) => unstolen(r.one)));
  return Number.isFinite(ratio) ? ratio : null;
}

export async function manyUsersRounds(o: {
  wrk: Omit<WrkOptions, "seconds" | "users">;
  shape: "json" | "sse";
  users: { count: number; prefix: string };
  rounds: number;
  seconds: number;
  /** The core the process under test runs on: each round then says how much of it was stolen. */
  sutCore?: number | null;
}): Promise<ManyUsersRun> {
  const sutCore = o.sutCore ?? null;
  // A warm-up that calls every user once: an account's first call loads it, once per
  // process, and the rounds measure the steady state after it (the warm-up's own rate is
  // kept, as the cost of a first call). wrk's round-robin starts at the first user on every
  // run, so a warm-up bounded in time would leave the later users' first calls to the rounds.
  const warm = await runWrk({ ...o.wrk, seconds: 300, users: o.users, stopAfter: o.users.count });
  const rounds: UsersRound[] = [];
  for (let i = 0; i < o.rounds; i++) {
    const one = await measuredRound({ ...o.wrk, seconds: o.seconds }, sutCore);
    const many = await measuredRound({ ...o.wrk, seconds: o.seconds, users: o.users }, sutCore);
    rounds.push({ one, many });
  }
  return {
    shape: o.shape,
    connections: o.wrk.connections,
    users: o.users.count,
    firstCalls: { ...keep(warm), calls: o.users.count },
    rounds,
    completed: warm.ok + rounds.reduce((sum, r) => sum + r.one.ok + r.many.ok, 0),
    rpsRatio: mean(rounds.map((r) => r.many.rps)) / mean(rounds.map((r) => r.one.rps)),
    p99Ratio: mean(rounds.map((r) => r.many.latencyUs.p99)) / mean(rounds.map((r) => r.one.latencyUs.p99)),
    rpsRatioUnstolen: unstolenRatio(rounds),
  };
}
