/**
 * Arm (f) with its traffic spread over many users: `npm run bench` sends every call for one
 * user, so every reserve and settle takes that user's account row; this sends each call for
 * the next of N connected users instead, from 64 loops of `fetch` (this process, pinned to
 * core 0 beside the upstream and a durable PostgreSQL; the service alone on core 1).
 *
 *   bun scripts/bench/many-users.ts [--users 200] [--seconds 5] [--entry PATH]
 *
 * --entry starts the service from another entry point (a `git worktree` of an earlier
 * commit), for an A/B. Prints one JSON line: calls per second, non-200 answers, and the
 * CPU the service and PostgreSQL used (cores). The client here is heavier than wrk, so its
 * figures compare with each other, not with `npm run bench`'s.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectUser, startService } from "./lib/arms";
import { startBenchPostgres } from "./lib/postgres";
import { BUN, childEnv, CpuMeter, pin, spawnPinned } from "./lib/proc";
import { BODIES } from "./workload";

const opt = (name: string, fallback: string) => {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : process.argv[at + 1]!;
};
const entry = opt("entry", "src/index.ts");
const userCount = Number(opt("users", "200"));
const seconds = Number(opt("seconds", "5"));
const CONCURRENCY = 64;

pin(process.pid, 0);
const work = mkdtempSync(join(tmpdir(), "bench-many-users-"));
const upstreamChild = spawnPinned("upstream", 0, [BUN, "scripts/bench/upstream.ts", "--kind", "lean"], childEnv());
const postgres = await startBenchPostgres(0);
try {
  const { url } = await upstreamChild.firstJson<{ url: string }>();
  const arm = await startService(
    "f",
    { dir: work, databasePath: "", postgresUrl: await postgres.createDatabase("bench_many_users") },
    { url, pid: upstreamChild.pid, requestsServed: async () => 0 },
    1,
    null,
    // Each user is connected through POST /sessions, which has a rate limit per app.
    { entry, env: { RL_SESSIONS_LIMIT: String(userCount * 2) } },
  );
  const base = new URL(arm.url).origin;
  const auth = { authorization: arm.headers.authorization! };
  const users = Array.from({ length: userCount }, (_, i) => `user-${i}`);
  for (const user of users) await connectUser(base, auth, user);

  let next = 0;
  const load = async (forSeconds: number) => {
    let ok = 0;
    let failed = 0;
    let stop = false;
    const loop = async () => {
      while (!stop) {
        const user = users[next++ % users.length]!;
        const response = await fetch(arm.url, {
          method: "POST",
          headers: { ...auth, "x-service-user": user, "content-type": "application/json" },
          body: BODIES.json,
        });
        await response.arrayBuffer();
        if (response.status === 200) ok++;
        else failed++;
      }
    };
    const loops = Array.from({ length: CONCURRENCY }, loop);
    await Bun.sleep(forSeconds * 1000);
    stop = true;
    await Promise.all(loops);
    return { ok, failed };
  };

  await load(2); // warm-up
  const meter = new CpuMeter({ sut: arm.pid });
  const postgresBefore = postgres.cpuSeconds();
  const startedAt = performance.now();
  const { ok, failed } = await load(seconds);
  const elapsed = (performance.now() - startedAt) / 1000;
  console.log(
    JSON.stringify({
      entry,
      users: userCount,
      rps: Math.round(ok / elapsed),
      failed,
      cpu: { sut: Number(meter.read().sut!.toFixed(2)), postgres: Number(((postgres.cpuSeconds() - postgresBefore) / elapsed).toFixed(2)) },
    }),
  );
  await arm.stop();
} finally {
  await postgres.stop();
  await upstreamChild.stop();
  rmSync(work, { recursive: true, force: true });
}
process.exit(0);
