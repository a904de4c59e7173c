/**
 * CPU per Redis script call from this runtime: ioredis (what the service uses, through
 * defineCommand → EVALSHA) against Bun's built-in RedisClient sending the same EVALSHA.
 * redis-server on core 0; run this pinned to core 1:
 *
 *   taskset -c 1 bun scripts/bench/redis-client.ts [--calls 40000]
 */
import Redis from "ioredis";
import { startRedis } from "./lib/arms";

const i = process.argv.indexOf("--calls");
const calls = i === -1 ? 40_000 : Number(process.argv[i + 1]);
const LUA = "redis.call('HINCRBY', KEYS[1], 'n', ARGV[1]) return {1, 2, 3}";
const redis = await startRedis(0);
try {
  const io = new Redis(redis.url);
  io.defineCommand("bench", { numberOfKeys: 1, lua: LUA });
  const sha = (await io.script("LOAD", LUA)) as string;
  const bun = new Bun.RedisClient(redis.url);
  await bun.connect();

  const measure = async (label: string, call: () => Promise<unknown>) => {
    for (let k = 0; k < 5000; k++) await call();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (next++ < calls) await call();
      }),
    );
    const cpu = process.cpuUsage(cpu0);
    const perSecond = calls / ((performance.now() - t0) / 1000);
    console.log(`| ${label} | ${((cpu.user + cpu.system) / calls).toFixed(1)} | ${Math.round(perSecond).toLocaleString("en-US")} |`);
  };
  console.log(`| client, 64 calls in flight, ${calls.toLocaleString("en-US")} calls | CPU µs per call (client process) | calls/s |`);
  console.log("| --- | ---: | ---: |");
  await measure("ioredis 6, defineCommand (EVALSHA)", () => (io as unknown as { bench(k: string, n: number): Promise<unknown> }).bench("k", 1));
  await measure('Bun.RedisClient, send("EVALSHA")', () => bun.send("EVALSHA", [sha, "1", "k", "1"]));
  io.disconnect();
  bun.close();
} finally {
  await redis.stop();
}
process.exit(0);
