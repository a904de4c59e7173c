/**
 * What a hostile body costs the service (issue 30). Two parts:
 *
 * 1. The structural scan alone (src/http/json-bounds.ts), per MiB of 4 MiB bodies of
 *    several shapes, beside JSON.parse of the same text (best of the rounds).
 * 2. A real server process (the bundle `npm start` runs): each hostile shape of
 *    tests/helpers/hostile-shapes.ts sent `--rounds` times, one at a time, to one route with
 *    the credential that reaches its body, while /healthz is polled; per shape, the answer,
 *    its slowest time and the slowest /healthz meanwhile. Then the bodies aimed at the
 *    route's own schema (schemaShapes).
 *
 *   bun scripts/bench/hostile-bodies.ts [--rounds 5] [--route /api/v1/chat/completions]
 */
import { jsonBoundExceeded } from "../../src/http/json-bounds";
import { cliCreateApp, startServer, tempDatabase } from "../../tests/helpers/server";
import { hostileShapes, schemaShapes } from "../../tests/helpers/hostile-shapes";
import { makeAdminTestApp } from "../../tests/helpers/admin";
import { flagReader } from "./lib/flags";

const flag = flagReader();
const rounds = Number(flag("rounds", "5"));
const route = flag("route", "/api/v1/chat/completions");

const MIB = 1024 * 1024;
const fill = (unit: string, bytes: number) =>
  Array(Math.floor(bytes / (unit.length + 1)))
    .fill(unit)
    .join(",");

function bestOf(run: () => unknown): number {
  let best = Infinity;
  for (let i = 0; i < rounds; i++) {
    const started = performance.now();
    run();
    best = Math.min(best, performance.now() - started);
  }
  return best;
}

console.log(`## The scan alone, 4 MiB bodies (best of ${rounds})\n`);
console.log("| shape | scan, ms/MiB | JSON.parse, ms/MiB |\n| --- | --- | --- |");
const scanShapes: Array<[string, string]> = [
  ["one string", `{"x":"${"a".repeat(4 * MIB - 8)}"}`],
  ['escaped quotes (`\\"` × 2M)', `{"x":"${'\\"'.repeat(2 * MIB - 4)}"}`],
  ["2M zeros (`0,` × 2M)", `[${fill("0", 4 * MIB - 2)}]`],
  ["10-byte strings", `[${fill('"abcdefgh"', 4 * MIB - 2)}]`],
  ["chat messages", JSON.stringify({ model: "m", messages: Array(Math.floor((4 * MIB) / 50)).fill({ role: "user", content: "hello there, how are you" }) })],
];
for (const [name, text] of scanShapes) {
  // Without the bound on values, so the whole body is scanned.
  const scan = bestOf(() => jsonBoundExceeded(text, undefined, Infinity));
  const parse = bestOf(() => JSON.parse(text));
  const mib = text.length / MIB;
  console.log(`| ${name} | ${(scan / mib).toFixed(2)} | ${(parse / mib).toFixed(2)} |`);
}

const db = tempDatabase();
const server = await startServer({ databaseUrl: db.databaseUrl, env: { RL_CHAT_LIMIT: "1000000", RL_SESSIONS_LIMIT: "1000000" } });
try {
  const app = await cliCreateApp(db.databaseUrl, "bench");
  const schema = makeAdminTestApp().app.routes.find((r) => r.method === "POST" && r.path === route)?.hooks.body;
  const shapes = [...hostileShapes(), ...(typeof schema === "object" && schema !== null ? schemaShapes(schema) : [])];
  let polling = true;
  let slowestPoll = 0;
  const poll = (async () => {
    while (polling) {
      const started = performance.now();
      await (await server.fetch("/healthz")).arrayBuffer();
      slowestPoll = Math.max(slowestPoll, performance.now() - started);
      await Bun.sleep(2);
    }
  })();
  console.log(`\n## ${route} on a server process, ${rounds} of each, one at a time, /healthz polled meanwhile\n`);
  console.log("| shape | answer | slowest answer, ms | slowest /healthz, ms |\n| --- | --- | --- | --- |");
  for (const shape of shapes) {
    let slowest = 0;
    let answer = "";
    slowestPoll = 0;
    for (let i = 0; i < rounds; i++) {
      const started = performance.now();
      const res = await server.fetch(route, {
        method: "POST",
        headers: { authorization: `Bearer ${app.secretKey}`, "x-service-user": "alice", ...shape.headers },
        body: shape.body(),
        duplex: "half",
      } as RequestInit);
      const text = await res.text();
      slowest = Math.max(slowest, performance.now() - started);
      answer = `${res.status} ${res.status >= 400 ? (JSON.parse(text) as { error: { message: string } }).error.message.slice(0, 60) : ""}`;
    }
    // The poll under way when the last answer came may still be waiting on it.
    await Bun.sleep(20);
    console.log(`| ${shape.name} | ${answer.replaceAll("|", "\\|")} | ${slowest.toFixed(1)} | ${slowestPoll.toFixed(1)} |`);
  }
  polling = false;
  await poll;
} finally {
  await server.stop();
  db.cleanup();
}
