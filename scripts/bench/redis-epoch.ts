/**
 * What the counters' epoch check costs redis-server per reserve (ARCHITECTURE.md §7 "Redis
 * epoch on every reserve"): the ledger's reserve function as it ships (the server's run id
 * read once per Lua state), against the same function without the epoch step (the account's
 * epoch still compared, to a constant), and with INFO read on every call, on a redis-server
 * of its own, in alternating rounds. Measured as redis-server's own CPU time
 * (/proc/<pid>/stat) per call, so the load generator's time does not count.
 *
 *   bun scripts/bench/redis-epoch.ts [--calls 100000] [--rounds 3]
 */
import Redis from "ioredis";
import { readFileSync } from "node:fs";
import { freePort } from "../lib/free-port";
import { flagReader } from "./lib/flags";
import { BUDGET_LIBRARY_SOURCE, nameOf } from "../../src/store/redis/budget-library";

const flag = flagReader();
const calls = Number(flag("calls", "100000"));
const rounds = Number(flag("rounds", "3"));
const PIPELINE = 64;

/** A copy of the library under other names (a library's function names must be unique), changed by `edit`. */
const variant = (prefix: string, edit: (source: string) => string) => edit(BUDGET_LIBRARY_SOURCE).replaceAll("mp_budget_", prefix);
const VARIANTS: Record<string, { source: string; fn: string }> = {
  "as shipped": { source: BUDGET_LIBRARY_SOURCE, fn: nameOf("reserve") },
  "no epoch step": {
    source: variant("mp_noepoch_", (s) => s.replace("local marker = epochOf(keys[1])\n  if not marker then return {-2, 0, 0, ''} end", "local marker = 'm'")),
    fn: nameOf("reserve").replace("mp_budget_", "mp_noepoch_"),
  },
  "INFO on every call": {
    source: variant("mp_info_", (s) => s.replace("runid = runid or string.match", "runid = string.match")),
    fn: nameOf("reserve").replace("mp_budget_", "mp_info_"),
  },
};

const port = freePort();
const server = Bun.spawn(["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdout: "ignore" });
const redis = new Redis(port, "127.0.0.1");
await new Promise((resolve) => redis.once("ready", resolve));
for (const { source } of Object.values(VARIANTS)) await redis.call("FUNCTION", "LOAD", "REPLACE", source);

/** redis-server's user + system CPU time so far, in µs (clock ticks of 10 ms). */
function serverCpuUs(): number {
  const fields = readFileSync(`/proc/${server.pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

async function round(label: string): Promise<number> {
  const { fn } = VARIANTS[label]!;
  await redis.flushdb();
  const runid = /run_id:(\w+)/.exec(await redis.info("server"))![1]!;
  const marker = label === "no epoch step" ? "m" : `${runid}:bench:0`;
  await redis.set("bl:epoch", marker);
  await redis.set("bp:live:bench", "1");
  await redis.hset("bl:acct", "spent", "0", "reserved", "0", "epoch", marker);
  const before = serverCpuUs();
  for (let sent = 0; sent < calls; sent += PIPELINE) {
    const pipeline = redis.pipeline();
    for (let i = sent; i < Math.min(calls, sent + PIPELINE); i++)
      pipeline.fcall(fn, 6, "bl:epoch", "bl:acct", `br:${i}`, "bp:held:bench", "bp:procs", "bp:live:bench", 1e15, 1, 1, 60_000, 60_000, "bench");
    await pipeline.exec();
  }
  return (serverCpuUs() - before) / calls;
}

const labels = Object.keys(VARIANTS);
console.log(`| round | ${labels.map((l) => `${l}, µs per reserve`).join(" | ")} |`);
console.log(`| --- | ${labels.map(() => "---:").join(" | ")} |`);
for (let r = 1; r <= rounds; r++) {
  // In turns: the order rotates, so a drift of the host falls on each.
  const order = labels.map((_, i) => labels[(i + r) % labels.length]!);
  const measured: Record<string, number> = {};
  for (const label of order) measured[label] = await round(label);
  console.log(`| ${r} | ${labels.map((l) => measured[l]!.toFixed(2)).join(" | ")} |`);
}
redis.disconnect();
server.kill();
await server.exited;
