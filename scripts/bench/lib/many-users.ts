/**
 * Issue 35's "many users": the same arm at the same concurrency, with every call for one
 * user and with the calls spread round-robin over N connected users (each its own budget
 * account, rate-limit key and ledger rows), in alternating rounds on the same process, each
 * pair in the other order from the last (./in-turns.ts), so that the host's drift falls on
 * both sides alike.
 *
 * A pair of rounds in which the hypervisor took more than `maxStolen` of the service's core
 * on either side is set aside, and another pair is run in its place (at most as many extra
 * pairs as were asked for). Why: steal does not only take time away, it raises the CPU a
 * call costs (about +16 % with 4 % or more stolen, the benchmarks log of 2026-11-27), so a
 * burst that falls on one side of a pair decides its ratio. The choice rests only on the
 * kernel's steal counter, the same rule for both sides, and every pair stays in the results.
 *
 * Both sides load the service the same way: wrk-post.lua's prepared requests, one per user,
 * sent in turn by its `request()` (the one user is the first of the many). Without a user
 * list wrk would send its one static request instead, a cheaper way for the loader, which
 * shares core 0 with the upstream and the stores: where core 0 sets the pace (PostgreSQL's
 * arms), the many-users side alone would pay the loader's extra work.
 */
import { CoreTimeMeter, type CoreShares } from "./core-time";
import { pairInTurns } from "./in-turns";
import { runWrk, type WrkOptions, type WrkResult } from "./wrk";

type RoundSide = Pick<WrkResult, "rps" | "ok" | "errors" | "latencyUs"> & {
  /** How the core of the process under test was shared during the round (null: not known). */
  sutCore?: CoreShares | null;
};

export interface UsersRound {
  one: RoundSide;
  many: RoundSide;
  /** Left out of the ratios: more of the core was stolen on one side than the run allowed. */
  setAside?: boolean;
}

/** The most of the service's core that may be stolen on either side of a pair that counts, by default. */
export const MAX_STOLEN = 0.02;

export interface ManyUsersRun {
  shape: "json" | "sse";
  connections: number;
  users: number;
  /**
   * The warm-up: one call for every user (their first in this process: each account is
   * loaded, and its first row of the period written), at the same concurrency.
   */
  firstCalls: Omit<RoundSide, "sutCore"> & { calls: number };
  /** Every pair run, in order; the ratios are over those not set aside. */
  rounds: UsersRound[];
  /** The steal above which a pair was set aside (null: none was, as the steal was not read). */
  maxStolen?: number | null;
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
async function measuredRound(options: WrkOptions, sutCore: number | null, run: typeof runWrk): Promise<RoundSide> {
  const meter = sutCore === null ? null : new CoreTimeMeter(sutCore);
  const result = await run(options);
  return { ...keep(result), sutCore: meter?.read() ?? null };
}

/** Within `maxStolen` on both sides; a side whose steal was not read is not held against the pair. */
const stolenAtMost = (r: UsersRound, maxStolen: number) => Math.max(r.one.sutCore?.stolen ?? 0, r.many.sutCore?.stolen ?? 0) <= maxStolen;

/** Pairs within `maxStolen`: once there are as many as asked for, no more are run. */
export function quietPairs(rounds: UsersRound[], maxStolen: number | null): number {
  return maxStolen === null ? rounds.length : rounds.filter((r) => stolenAtMost(r, maxStolen)).length;
}

/**
 * The pairs marked, and the ratios over those that count: the pairs within `maxStolen`, or
 * every pair when none was (a host stolen throughout still gets a figure, and the table's
 * steal column says so).
 */
export function judgeRounds(rounds: UsersRound[], maxStolen: number | null): Pick<ManyUsersRun, "rounds" | "rpsRatio" | "p99Ratio" | "rpsRatioUnstolen"> {
  const anyQuiet = maxStolen !== null && rounds.some((r) => stolenAtMost(r, maxStolen));
  const marked = rounds.map((r) => ({ ...r, setAside: anyQuiet && !stolenAtMost(r, maxStolen!) }));
  const counted = marked.filter((r) => !r.setAside);
  return {
    rounds: marked,
    rpsRatio: mean(counted.map((r) => r.many.rps)) / mean(counted.map((r) => r.one.rps)),
    p99Ratio: mean(counted.map((r) => r.many.latencyUs.p99)) / mean(counted.map((r) => r.one.latencyUs.p99)),
    rpsRatioUnstolen: unstolenRatio(counted),
  };
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
  /** See the top of this file; by default MAX_STOLEN when `sutCore` is given. */
  maxStolen?: number;
  /** What runs each round: wrk, unless a test stands in for it. */
  runWrk?: typeof runWrk;
}): Promise<ManyUsersRun> {
  const sutCore = o.sutCore ?? null;
  const maxStolen = sutCore === null ? null : (o.maxStolen ?? MAX_STOLEN);
  // A warm-up that calls every user once: an account's first call loads it, once per
  // process, and the rounds measure the steady state after it (the warm-up's own rate is
  // kept, as the cost of a first call). wrk's round-robin starts at the first user on every
  // run, so a warm-up bounded in time would leave the later users' first calls to the rounds.
  const run = o.runWrk ?? runWrk;
  const warm = await run({ ...o.wrk, seconds: 300, users: o.users, stopAfter: o.users.count });
  const oneUser = { count: 1, prefix: o.users.prefix };
  const rounds: UsersRound[] = [];
  const mostPairs = maxStolen === null ? o.rounds : 2 * o.rounds;
  while (rounds.length < mostPairs && quietPairs(rounds, maxStolen) < o.rounds) {
    const roundFor = (users: typeof o.users) => () => measuredRound({ ...o.wrk, seconds: o.seconds, users }, sutCore, run);
    const [one, many] = await pairInTurns(rounds.length, roundFor(oneUser), roundFor(o.users));
    rounds.push({ one, many });
  }
  return {
    shape: o.shape,
    connections: o.wrk.connections,
    users: o.users.count,
    firstCalls: { ...keep(warm), calls: o.users.count },
    maxStolen,
    completed: warm.ok + rounds.reduce((sum, r) => sum + r.one.ok + r.many.ok, 0),
    ...judgeRounds(rounds, maxStolen),
  };
}
