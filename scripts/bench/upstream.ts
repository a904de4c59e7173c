/**
 * The upstream every arm of the benchmark talks to, on 127.0.0.1.
 *
 *   bun scripts/bench/upstream.ts [--kind lean|mock] [--port N]
 *
 * `mock` serves packages/mock-upstream/src (the demo-mode mock) as it is. `lean` replays, from
 * memory, the exact bytes the mock answers to the bench's three request shapes
 * (./workload.ts): the bodies are captured from the mock in-process at start, so the
 * proxies receive the same JSON and the same SSE events, one event per write, with the
 * long stream's 100 ms pauses kept. The lean one exists so that the upstream is not what
 * limits a run (BENCHMARKS.md compares the two).
 *
 * Both count the chat requests they served: GET /__stats. Prints one JSON line with the
 * base URL once listening; stops on SIGTERM/SIGINT.
 */
import { createMockUpstream } from "../../packages/mock-upstream/src";
import { flagReader } from "./lib/flags";
import { BODIES, LONG_STREAM_CHUNKS, LONG_STREAM_PAUSE_MS, shapeOf, type Shape } from "./workload";

const BASE_PATH = "/api/v1";

interface Captured {
  status: number;
  headers: Record<string, string>;
  /** The JSON body, or the SSE events (each ending in its blank line). */
  parts: Uint8Array[];
}

const encoder = new TextEncoder();

/** Asks the real mock, in-process, what it answers to each bench body. */
async function capture(): Promise<Record<Shape, Captured>> {
  const mock = createMockUpstream({ recordServed: false });
  const out = {} as Record<Shape, Captured>;
  for (const shape of ["json", "sse", "long"] as const) {
    // The long stream's pauses are replayed by the lean upstream itself; capture without them.
    const body = shape === "long" ? BODIES.long.replace(/ pause_ms=\d+/, "") : BODIES[shape];
    const response = await mock.fetch(
      new Request(`http://capture${BASE_PATH}/chat/completions`, {
        method: "POST",
        headers: { authorization: "Bearer capture", "content-type": "application/json" },
        body,
      }),
    );
    const text = await response.text();
    if (response.status !== 200) throw new Error(`the mock refused the ${shape} bench body: ${text}`);
    const headers: Record<string, string> = {};
    for (const [name, value] of response.headers) headers[name] = value;
    const parts = shape === "json" ? [text] : text.split(/(?<=\n\n)/);
    out[shape] = { status: response.status, headers, parts: parts.map((p) => encoder.encode(p)) };
  }
  const longContent = out.long.parts.length - 4; // role, content…, finish, usage, [DONE]
  if (longContent !== LONG_STREAM_CHUNKS) throw new Error(`long stream has ${longContent} content chunks, expected ${LONG_STREAM_CHUNKS}`);
  return out;
}

/** One event per pull; for the long stream, a pause before the role chunk and each content chunk. */
function replay(parts: Uint8Array[], pauseMs: number, pausedEvents: number): ReadableStream<Uint8Array> {
  let next = 0;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (next < pausedEvents) await Bun.sleep(pauseMs);
        const part = parts[next++];
        if (part) controller.enqueue(part);
        if (next >= parts.length) controller.close();
      },
    },
    { highWaterMark: 0 },
  );
}

export interface BenchUpstream {
  url: string;
  port: number;
  stop(): Promise<void>;
}

export async function startBenchUpstream(kind: "lean" | "mock", port = 0): Promise<BenchUpstream> {
  const stats = { kind, chat: 0, json: 0, sse: 0, long: 0, other: 0 };
  const mock = createMockUpstream({ recordServed: false });
  const models = await (await mock.fetch(new Request(`http://capture${BASE_PATH}/models`))).text();
  const captured = kind === "lean" ? await capture() : null;

  const lean = async (request: Request): Promise<Response> => {
    if (!request.headers.get("authorization")?.startsWith("Bearer ")) return new Response('{"error":{"code":401,"message":"no key"}}', { status: 401 });
    const shape = shapeOf(await request.text());
    stats[shape]++;
    const c = captured![shape];
    if (shape === "json") return new Response(c.parts[0], { status: 200, headers: c.headers });
    const body = shape === "long" ? replay(c.parts, LONG_STREAM_PAUSE_MS, LONG_STREAM_CHUNKS + 1) : replay(c.parts, 0, 0);
    return new Response(body, { status: 200, headers: c.headers });
  };

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port,
    idleTimeout: 0,
    async fetch(request) {
      const url = request.url;
      const path = url.slice(url.indexOf("/", url.indexOf("//") + 2));
      if (path === `${BASE_PATH}/chat/completions` && request.method === "POST") {
        stats.chat++;
        if (captured) return lean(request);
        const response = await mock.fetch(request);
        if ((response.headers.get("content-type") ?? "").includes("event-stream")) stats.sse++;
        else stats.json++;
        return response;
      }
      if (path === `${BASE_PATH}/models`) return new Response(models, { headers: { "content-type": "application/json" } });
      if (path === "/__stats") return Response.json(stats);
      stats.other++;
      return new Response("not found", { status: 404 });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}${BASE_PATH}`,
    port: server.port!,
    stop: async () => {
      await server.stop(true);
    },
  };
}

if (import.meta.main) {
  const flag = flagReader();
  const kind = flag("kind", "lean");
  if (kind !== "lean" && kind !== "mock") throw new Error("--kind is lean or mock");
  const upstream = await startBenchUpstream(kind, Number(flag("port", "0")));
  console.log(JSON.stringify({ url: upstream.url, port: upstream.port, kind }));
  const stop = () => void upstream.stop().then(() => process.exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
