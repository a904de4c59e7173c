/**
 * Where the time goes between (b) and (c), by subtraction and addition: the CPU the process
 * under test spends per completed request, for the bare forwarder, the bare forwarder plus
 * single pieces of the service's work, the same forwarder in Elysia, and the service with
 * pieces taken out. Each row is one `scripts/bench/profile.ts` run (own processes, pinned
 * like `npm run bench`, wrk at 64 connections). Prints a Markdown table.
 *
 *   bun scripts/bench/ablate.ts [--seconds 8] [--shapes json,sse]
 */
import { BUN, childEnv, REPO_ROOT } from "./lib/proc";

const args = process.argv.slice(2);
const opt = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : args[i + 1]!;
};
const seconds = opt("seconds", "8");
const shapes = opt("shapes", "json,sse").split(",");

interface Row {
  label: string;
  flags: string[];
}

const ROWS: Row[] = [
  { label: "(b) bare forwarder", flags: ["--arm", "b", "--entry", "scripts/bench/bare-forwarder.ts"] },
  { label: "(b) + abort signal and timer on fetch", flags: ["--arm", "b", "--entry", "scripts/bench/variants/bare-plus.ts", "--variant", "signal"] },
  { label: "(b) + read, decode and parse the JSON answer", flags: ["--arm", "b", "--entry", "scripts/bench/variants/bare-plus.ts", "--variant", "parse"] },
  { label: "(b) + SHA-256 secret check", flags: ["--arm", "b", "--entry", "scripts/bench/variants/bare-plus.ts", "--variant", "sha"] },
  { label: "(b) + random UUID request id", flags: ["--arm", "b", "--entry", "scripts/bench/variants/bare-plus.ts", "--variant", "requestid"] },
  { label: "(b) + all four above", flags: ["--arm", "b", "--entry", "scripts/bench/variants/bare-plus.ts", "--variant", "signal,parse,sha,requestid"] },
  { label: "(b) as an Elysia route with the chat body schema", flags: ["--arm", "b", "--entry", "scripts/bench/variants/elysia-forwarder.ts"] },
  { label: "(c) this service (src/index.ts)", flags: ["--arm", "c"] },
  {
    label: "(c) without the SQLite ledger insert (rows discarded)",
    flags: ["--arm", "c", "--entry", "scripts/bench/variants/service.ts", "--variant", "no-writer"],
  },
  {
    label: "(c) with app, key and connection reads cached in memory",
    flags: ["--arm", "c", "--entry", "scripts/bench/variants/service.ts", "--variant", "cached-reads"],
  },
  { label: "(c) with an allow-all rate limiter", flags: ["--arm", "c", "--entry", "scripts/bench/variants/service.ts", "--variant", "no-ratelimit"] },
  {
    label: "(c) with all three taken out",
    flags: ["--arm", "c", "--entry", "scripts/bench/variants/service.ts", "--variant", "no-writer,cached-reads,no-ratelimit"],
  },
  { label: "(d) this service + Redis", flags: ["--arm", "d"] },
];

interface Measured {
  rps: number;
  usPerRequestOnSutCore: number;
  usPerRequestByThread: Record<string, string>;
  errors: number;
}

const results: Array<{ row: Row; shape: string; m: Measured | null }> = [];
for (const shape of shapes) {
  for (const row of ROWS) {
    const proc = Bun.spawn([BUN, "scripts/bench/profile.ts", ...row.flags, "--shape", shape, "--seconds", seconds], {
      cwd: REPO_ROOT,
      env: childEnv(),
      stdout: "pipe",
      stderr: "pipe",
    });
    const guard = setTimeout(() => proc.kill("SIGKILL"), (Number(seconds) + 90) * 1000);
    const out = await new Response(proc.stdout).text();
    await proc.exited;
    clearTimeout(guard);
    const line = out.split("\n").find((l) => l.startsWith("{"));
    const m = line ? (JSON.parse(line) as Measured) : null;
    results.push({ row, shape, m });
    console.error(`${shape} ${row.label}: ${m ? `${m.rps} req/s, ${m.usPerRequestOnSutCore} us/request ${JSON.stringify(m.usPerRequestByThread)}` : "failed"}`);
  }
}

for (const shape of shapes) {
  const base = results.find((r) => r.shape === shape && r.row.label.startsWith("(b) bare"))?.m;
  console.log(`\n| ${shape.toUpperCase()}, c=64 | req/s | CPU µs per request (ratio to b) | of which main JS thread | of which Bun's HTTP client thread |`);
  console.log("| --- | ---: | ---: | --- | --- |");
  for (const { row, m } of results.filter((r) => r.shape === shape)) {
    if (!m) {
      console.log(`| ${row.label} | failed | | | |`);
      continue;
    }
    const ratio = base ? ` (${(m.usPerRequestOnSutCore / base.usPerRequestOnSutCore).toFixed(2)}×)` : "";
    const threads = m.usPerRequestByThread;
    const main = Object.entries(threads).find(([k]) => k.startsWith("bun"))?.[1] ?? "–";
    console.log(
      `| ${row.label} | ${Math.round(m.rps).toLocaleString("en-US")} | ${m.usPerRequestOnSutCore}${ratio} | ${main} | ${threads["HTTP Client"] ?? "–"} |`,
    );
  }
}
process.exit(0);
