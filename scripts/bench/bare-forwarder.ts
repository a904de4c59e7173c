/**
 * Arm (b): the least a proxy on this runtime can do. Bun.serve parses the JSON body,
 * fetches the upstream with it, and returns the upstream's status, content type and body
 * (a stream is passed through as Bun's fetch delivers it). No auth, no limits, no
 * metering: the physical limit every other arm is compared with.
 *
 *   UPSTREAM_BASE_URL=http://127.0.0.1:PORT/api/v1 bun scripts/bench/bare-forwarder.ts [--port N]
 *
 * Run with BUN_CONFIG_MAX_HTTP_REQUESTS raised, like the service, or upstream calls beyond
 * 256 at a time queue inside Bun's fetch. Prints one JSON line with its URL once listening.
 */
const upstream = process.env.UPSTREAM_BASE_URL;
if (!upstream) throw new Error("UPSTREAM_BASE_URL is required");
const target = `${upstream.replace(/\/+$/, "")}/chat/completions`;
const portArg = process.argv.indexOf("--port");

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: portArg === -1 ? 0 : Number(process.argv[portArg + 1]),
  // Long streams are quiet for 100 ms at a time; no idle cut-off, as in the service.
  idleTimeout: 0,
  async fetch(request) {
    const body = (await request.json()) as Record<string, unknown>;
    const response = await fetch(target, {
      method: "POST",
      headers: { authorization: "Bearer bench", "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return new Response(response.body, {
      status: response.status,
      headers: { "content-type": response.headers.get("content-type") ?? "application/json" },
    });
  },
});

console.log(JSON.stringify({ url: `http://127.0.0.1:${server.port}`, port: server.port }));
const stop = () => void server.stop(true).then(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);

export {};
