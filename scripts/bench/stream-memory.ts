/**
 * What 2,000 open streams cost in memory, piece by piece: peak RSS of a fresh process for
 * the bare forwarder passing the body through, the same reading it chunk by chunk in
 * JavaScript (the floor for any relay that looks at the bytes), with tee(), and the service.
 * Same pinning and long-stream client as `npm run bench`.
 *
 *   bun scripts/bench/stream-memory.ts [--streams 2000] [--prompt-kb N] [--only TEXT] [--entry PATH] [--redis] [--bun-flag FLAG]... [--env NAME=VALUE]...
 *
 * --only runs just the arms whose label contains TEXT (e.g. "(c)"). --entry starts the
 * service arm from another entry point, e.g. a `git worktree` of an earlier commit's
 * src/index.ts, for an A/B of a change. Each --bun-flag (e.g. --smol) is passed to Bun
 * when it starts the service arm, and each --env is set in its environment (e.g. a
 * runtime or allocator setting). --prompt-kb makes every stream's prompt about N KB longer
 * (the bench's prompt is a few dozen bytes; real chats send their history), to see what
 * an open stream keeps of its request. --redis runs the service arm as arm (d) instead: with
 * a redis-server of its own, pinned as in `npm run bench`.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startBare, startRedis, startService, type RunningArm, type Upstream } from "./lib/arms";
import { envFlags, repeatedFlag } from "./lib/flags";
import { BUN, childEnv, memoryMb, resetPeakRss, spawnPinned } from "./lib/proc";
import { LONG_BODY } from "./workload";

const i = process.argv.indexOf("--streams");
const streams = i === -1 ? 2000 : Number(process.argv[i + 1]);
const onlyAt = process.argv.indexOf("--only");
const only = onlyAt === -1 ? "" : process.argv[onlyAt + 1]!;
const entryAt = process.argv.indexOf("--entry");
const entry = entryAt === -1 ? undefined : process.argv[entryAt + 1]!;
const promptKbAt = process.argv.indexOf("--prompt-kb");
const promptKb = promptKbAt === -1 ? 0 : Number(process.argv[promptKbAt + 1]);
const bunFlags = repeatedFlag("bun-flag");
const withRedis = process.argv.includes("--redis");
const extraEnv = envFlags();
const envSettings = Object.entries(extraEnv).map(([name, value]) => `${name}=${value}`);
const serviceLabel = [
  withRedis ? "(d) this service with Redis" : "(c) this service",
  entry && `(${entry})`,
  bunFlags.length > 0 && `(bun ${bunFlags.join(" ")})`,
  envSettings.length > 0 && `(${envSettings.join(" ")})`,
]
  .filter(Boolean)
  .join(" ");
const work = mkdtempSync(join(tmpdir(), "bench-stream-memory-"));
const bodyFile = join(work, "long.json");
writeFileSync(bodyFile, promptKb > 0 ? withLongerPrompt(LONG_BODY, promptKb) : LONG_BODY);

const up = spawnPinned("upstream", 0, [BUN, "scripts/bench/upstream.ts"], childEnv());
const redis = withRedis ? await startRedis(0) : null;
try {
  const { url } = await up.firstJson<{ url: string }>();
  const upstream: Upstream = { url, pid: up.pid, requestsServed: async () => 0 };
  const arms: Array<[string, () => Promise<RunningArm>]> = [
    ["(b) bare forwarder, body passed through", () => startBare(upstream, 1)],
    ["(b) + body read chunk by chunk in JS and re-enqueued", () => startBare(upstream, 1, [], "scripts/bench/variants/bare-plus.ts", { BARE_PLUS: "relay" })],
    ["(b) + body split with tee(), one branch drained", () => startBare(upstream, 1, [], "scripts/bench/variants/bare-plus.ts", { BARE_PLUS: "relay-tee" })],
    [
      serviceLabel,
      () =>
        startService(redis ? "d" : "c", { dir: work, databasePath: join(work, "proxy.sqlite") }, upstream, 1, redis?.url ?? null, {
          entry,
          bunFlags,
          env: extraEnv,
        }),
    ],
    // Not in the default table (--only "memory-log"): the service logging its heap every second.
    ...(only.includes("memory-log")
      ? ([
          [
            redis ? "(d) memory-log" : "(c) memory-log",
            () =>
              startService(redis ? "d" : "c", { dir: work, databasePath: join(work, "proxy-log.sqlite") }, upstream, 1, redis?.url ?? null, {
                entry: "scripts/bench/variants/service.ts",
                env: { BENCH_VARIANT: "memory-log", BENCH_MEMORY_LOG: join(process.cwd(), "tmp/bench/memory-log.jsonl"), ...extraEnv },
              }),
          ],
        ] as Array<[string, () => Promise<RunningArm>]>)
      : []),
  ];
  console.log(`| ${streams.toLocaleString("en-US")} concurrent long streams, fresh process | idle RSS (MB) | peak RSS (MB) | per stream (KB) | completed |`);
  console.log("| --- | ---: | ---: | ---: | ---: |");
  for (const [label, start] of arms) {
    if (!label.includes(only)) continue;
    const arm = await start();
    await Bun.sleep(500);
    const idle = memoryMb(arm.pid).rss;
    resetPeakRss(arm.pid);
    const client = spawnPinned(
      "long-streams",
      0,
      [
        BUN,
        "scripts/bench/long-streams.ts",
        "--url",
        arm.url,
        "--body-file",
        bodyFile,
        "--headers",
        JSON.stringify(arm.headers),
        "--streams",
        String(streams),
        "--seconds",
        "60",
      ],
      childEnv({ BUN_CONFIG_MAX_HTTP_REQUESTS: "4096" }),
    );
    await client.proc.exited;
    await Bun.sleep(50);
    const peak = memoryMb(arm.pid).hwm;
    const result = JSON.parse(client.lines.find((l) => l.startsWith("{")) ?? "{}") as { completed?: number };
    console.log(`| ${label} | ${idle.toFixed(1)} | ${peak.toFixed(1)} | ${(((peak - idle) * 1024) / streams).toFixed(0)} | ${result.completed ?? "–"} |`);
    await arm.stop();
  }
} finally {
  await redis?.stop();
  await up.stop();
  rmSync(work, { recursive: true, force: true });
}
process.exit(0);

/** The body with a first user message of about `kb` KB before the bench's own messages. */
function withLongerPrompt(bodyText: string, kb: number): string {
  const parsed = JSON.parse(bodyText) as { messages: Array<{ role: string; content: string }> };
  parsed.messages.unshift({ role: "user", content: "Some earlier turn of the conversation. ".repeat(Math.ceil((kb * 1024) / 39)) });
  return JSON.stringify(parsed);
}
