/**
 * Issue 35's "many users": the same arm at the same concurrency, with every call for one
 * user and with the calls spread round-robin over N connected users (each its own budget
 * account, rate-limit key and ledger rows), in alternating rounds on the same process so
 * that the host's drift falls on both sides alike.
 */
import { runWrk, type WrkOptions, type WrkResult } from "./wrk";

export interface UsersRound {
  one: Pick<WrkResult, "rps" | "ok" | "errors" | "latencyUs">;
  many: Pick<WrkResult, "rps" | "ok" | "errors" | "latencyUs">;
}

export interface ManyUsersRun {
  shape: "json" | "sse";
  connections: number;
  users: number;
  /**
   * The warm-up: one call for every user (their first in this process: each account is
   * loaded, and its first row of the period written), at the same concurrency.
   */
  firstCalls: UsersRound["many"] & { calls: number };
  rounds: UsersRound[];
  /** 2xx responses over the warm-up and every round. */
  completed: number;
  /** Mean calls/s with many users over mean calls/s with one (target ≥ 0.95). */
  rpsRatio: number;
  /** Mean p99 under load with many users over the same with one (target ≤ 1.2). */
  p99Ratio: number;
}

const keep = (r: WrkResult): UsersRound["one"] => ({ rps: r.rps, ok: r.ok, errors: r.errors, latencyUs: r.latencyUs });
const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

export async function manyUsersRounds(o: {
  wrk: Omit<WrkOptions, "seconds" | "users">;
  shape: "json" | "sse";
  users: { count: number; prefix: string };
  rounds: number;
  seconds: number;
}): Promise<ManyUsersRun> {
  // A warm-up that calls every user once: an account's first call loads it, once per
  // process, and the rounds measure the steady state after it (the warm-up's own rate is
  // kept, as the cost of a first call). wrk's round-robin starts at the first user on every
  // run, so a warm-up bounded in time would leave the later users' first calls to the rounds.
  const warm = await runWrk({ ...o.wrk, seconds: 300, users: o.users, stopAfter: o.users.count });
  const rounds: UsersRound[] = [];
  for (let i = 0; i < o.rounds; i++) {
    const one = await runWrk({ ...o.wrk, seconds: o.seconds });
    const many = await runWrk({ ...o.wrk, seconds: o.seconds, users: o.users });
    rounds.push({ one: keep(one), many: keep(many) });
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
  };
}
