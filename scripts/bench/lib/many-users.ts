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
  warmupSeconds: number;
}): Promise<ManyUsersRun> {
  // A warm-up over every user first: each account's first call loads it, once per process.
  const warm = await runWrk({ ...o.wrk, seconds: o.warmupSeconds, users: o.users });
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
    rounds,
    completed: warm.ok + rounds.reduce((sum, r) => sum + r.one.ok + r.many.ok, 0),
    rpsRatio: mean(rounds.map((r) => r.many.rps)) / mean(rounds.map((r) => r.one.rps)),
    p99Ratio: mean(rounds.map((r) => r.many.latencyUs.p99)) / mean(rounds.map((r) => r.one.latencyUs.p99)),
  };
}
