/**
 * The bare forwarder (../bare-forwarder.ts) plus single pieces of the service's per-request
 * work, each as the service does it, to price them one at a time. For measurement only.
 *
 *   BARE_PLUS=signal,parse,sha,uuidv7 UPSTREAM_BASE_URL=… bun scripts/bench/variants/bare-plus.ts
 *     signal     an AbortController and a headers timer around fetch (src/upstream/client.ts)
 *     parse      JSON answers read whole, decoded and parsed, then re-sent from the bytes
 *                (src/services/chat.ts completeJson)
 *     sha        SHA-256 of a secret and a constant-time compare (src/auth/secret-key.ts)
 *     uuidv7     Bun.randomUUIDv7() as x-request-id (src/http/request-context.ts)
 *     relay      streams read chunk by chunk in JavaScript and re-enqueued (a pull stream,
 *                highWaterMark 0, as src/upstream/stream-relay.ts does, without the scanner)
 *     relay-tee  streams split with ReadableStream.tee() instead (what the design rules out)
 *     redis      one Redis round trip (an EVALSHA of a one-line script, through ioredis with
 *                the service's auto-pipelining) before the fetch, as the service's reserve
 *                is at the least; needs REDIS_URL (profile.ts --arm b --variant redis starts one)
 */
import { hashSecret, secretMatches } from "../../../src/auth/secret-key";

const upstream = process.env.UPSTREAM_BASE_URL;
if (!upstream) throw new Error("UPSTREAM_BASE_URL is required");
const target = `${upstream.replace(/\/+$/, "")}/chat/completions`;
const on = new Set((process.env.BARE_PLUS ?? "").split(",").filter(Boolean));
const storedHash = hashSecret("0123456789abcdefghijklmnopqrstuv");
const redis = on.has("redis") ? await connectRedis() : null;
let calls = 0;

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  idleTimeout: 0,
  async fetch(request) {
    const headers: Record<string, string> = {};
    if (on.has("uuidv7")) headers["x-request-id"] = Bun.randomUUIDv7();
    if (on.has("sha") && !secretMatches("0123456789abcdefghijklmnopqrstuv", storedHash)) return new Response("no", { status: 401 });
    const body = (await request.json()) as Record<string, unknown>;
    // A key per call spread over 64, like many users' budgets.
    if (redis) await redis.evalsha(redis.scriptSha, 1, `bench:${calls++ & 63}`, 1);
    const abort = on.has("signal") ? new AbortController() : null;
    const timer = abort ? setTimeout(() => abort.abort(new Error("timeout")), 60_000) : null;
    let response: Response;
    try {
      response = await fetch(target, {
        method: "POST",
        headers: { authorization: "Bearer bench", "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: abort?.signal,
      });
    } finally {
      if (timer) clearTimeout(timer);
    }
    headers["content-type"] = response.headers.get("content-type") ?? "application/json";
    if (on.has("parse") && !headers["content-type"].includes("event-stream")) {
      const bytes = await response.arrayBuffer();
      const parsed = JSON.parse(new TextDecoder().decode(bytes)) as { usage?: unknown };
      if (!parsed.usage) throw new Error("no usage");
      return new Response(bytes, { status: response.status, headers });
    }
    if (on.has("relay") && response.body) return new Response(relay(response.body), { status: response.status, headers });
    if (on.has("relay-tee") && response.body) {
      const [toClient, toScanner] = response.body.tee();
      void drain(toScanner);
      return new Response(toClient, { status: response.status, headers });
    }
    return new Response(response.body, { status: response.status, headers });
  },
});

function relay(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const { value, done } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

/**
 * ioredis with the service's auto-pipelining (src/deps.ts) and a one-line script loaded.
 * Unlike the service, the offline queue is on: the script is loaded before the connection is up.
 */
async function connectRedis() {
  const { default: Redis } = await import("ioredis");
  const client = new Redis(process.env.REDIS_URL ?? "", { enableAutoPipelining: true, enableOfflineQueue: true, maxRetriesPerRequest: 0 });
  const scriptSha = (await client.script("LOAD", "return redis.call('INCRBY', KEYS[1], ARGV[1])")) as string;
  return Object.assign(client, { scriptSha });
}

async function drain(body: ReadableStream<Uint8Array>): Promise<void> {
  for await (const _ of body) {
    // only read
  }
}

console.log(JSON.stringify({ url: `http://127.0.0.1:${server.port}`, port: server.port, pieces: [...on] }));
process.on("SIGTERM", () => void server.stop(true).then(() => process.exit(0)));
