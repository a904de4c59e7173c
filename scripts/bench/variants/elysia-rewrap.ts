/**
 * What Elysia's re-wrapping of a returned Response costs: a route that sets headers in
 * `set.headers` (as the request-id and rate-limit hooks do) and returns `new Response(...)`
 * — Elysia then copies the headers and builds a second Response — against one that puts
 * every header in `set.headers` and returns the bytes. In-process, 64 in flight.
 *
 *   taskset -c 1 bun scripts/bench/variants/elysia-rewrap.ts
 */
import { Elysia } from "elysia";

const bytes = new TextEncoder().encode(JSON.stringify({ id: "x".repeat(600) }));
const build = (returnsResponse: boolean) =>
  new Elysia()
    .onRequest(({ set }) => {
      set.headers["x-request-id"] = crypto.randomUUID();
    })
    .post("/c", ({ set }) => {
      set.headers["ratelimit-limit"] = "1000";
      set.headers["ratelimit-remaining"] = "999";
      set.headers["ratelimit-reset"] = "60";
      if (returnsResponse) return new Response(bytes, { status: 200, headers: { "content-type": "application/json", "x-generation-id": "gen-1" } });
      set.headers["content-type"] = "application/json";
      set.headers["x-generation-id"] = "gen-1";
      return bytes;
    });

for (const returnsResponse of [true, false, true, false]) {
  const app = build(returnsResponse);
  const one = async () => void (await (await app.handle(new Request("http://localhost/c", { method: "POST", body: "{}" }))).arrayBuffer());
  for (let k = 0; k < 20_000; k++) await one();
  const cpu0 = process.cpuUsage();
  const n = 100_000;
  let next = 0;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next++ < n) await one();
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  console.log(
    `${returnsResponse ? "returns a Response (re-wrapped)" : "returns bytes, headers in set"}: ${((cpu.user + cpu.system) / n).toFixed(2)} CPU µs/request`,
  );
}
process.exit(0);
