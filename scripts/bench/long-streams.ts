/**
 * Many long streams at once, from one process: the memory a proxy needs per open stream.
 *
 *   BUN_CONFIG_MAX_HTTP_REQUESTS=4096 bun scripts/bench/long-streams.ts --url URL \
 *     --body-file F --headers '{"k":"v"}' --streams 2000 [--seconds 60]
 *
 * Opens --streams requests (in batches of 250, 50 ms apart, so the listen backlog does not
 * overflow), reads each body to its end as it arrives, and checks it ends with
 * `data: [DONE]`. Bun's fetch runs only 256 requests at a time unless
 * BUN_CONFIG_MAX_HTTP_REQUESTS is raised in this (the client) process. Prints one JSON line.
 * Every request is aborted after --seconds.
 */
import { flagReader } from "./lib/flags";

const flag = flagReader();

const url = flag("url");
const body = await Bun.file(flag("body-file")).text();
const headers = { "content-type": "application/json", ...(JSON.parse(flag("headers", "{}")) as Record<string, string>) };
const streams = Number(flag("streams"));
const signal = AbortSignal.timeout(Number(flag("seconds", "60")) * 1000);

let open = 0;
let peakOpen = 0;
let completed = 0;
const failures = new Map<string, number>();
const fail = (why: string) => failures.set(why, (failures.get(why) ?? 0) + 1);
const t0 = performance.now();
let allOpenAt = 0;

async function one(): Promise<void> {
  let counted = false;
  try {
    const response = await fetch(url, { method: "POST", headers, body, signal });
    if (response.status !== 200) {
      fail(`status ${response.status}`);
      await response.body?.cancel();
      return;
    }
    open++;
    counted = true;
    if (open > peakOpen) {
      peakOpen = open;
      if (peakOpen === streams) allOpenAt = performance.now();
    }
    const decoder = new TextDecoder();
    let tail = "";
    for await (const chunk of response.body!) tail = (tail + decoder.decode(chunk, { stream: true })).slice(-64);
    if (tail.endsWith("data: [DONE]\n\n")) completed++;
    else fail("ended without [DONE]");
  } catch (err) {
    fail(err instanceof Error ? err.name + ": " + err.message.slice(0, 80) : String(err));
  } finally {
    if (counted) open--;
  }
}

const all: Promise<void>[] = [];
for (let i = 0; i < streams; i += 250) {
  for (let j = i; j < Math.min(streams, i + 250); j++) all.push(one());
  await Bun.sleep(50);
}
await Promise.all(all);

console.log(
  JSON.stringify({
    streams,
    completed,
    peakOpen,
    allOpenAfterMs: allOpenAt ? Math.round(allOpenAt - t0) : null,
    seconds: Math.round(performance.now() - t0) / 1000,
    failures: Object.fromEntries(failures),
  }),
);
