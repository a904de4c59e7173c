/**
 * Streams over real HTTP, against a real proxy process in front of the mock upstream served
 * on a socket: no buffering, a quiet stream that outlives the server's idle timeout, client
 * disconnects that are still metered, relayed bodies that match OpenRouter's spec, and a
 * SIGTERM that lets an open stream finish.
 *
 * No timing thresholds: order is read off the mock's own progress (`served[].deliveredTokens`,
 * `completed`), and eventual state is polled with a bound that only a bug reaches.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { checkChatStream, validateChatCompletion } from "../helpers/openrouter-spec";
import { SseReader, eventually, nano, readLedgerRow, startProxyStack, type ProxyStack } from "../helpers/proxy-stack";
import { completionText } from "../../packages/mock-upstream/src";

// Real server processes; bunfig.toml's [test] timeout is not a key bun reads (its default is 5 s).
setDefaultTimeout(60_000);

const MODEL = "openai/gpt-4o-mini";

/**
 * Silence long enough to be cut by an idle timeout that still applied to streams. Bun's own
 * default is 10 s, but Elysia's listen() sets `idleTimeout: 30`, and Bun fires it about 2 s
 * late (measured: a 30 s idle timeout cuts at ~32 s, a 10 s one at ~12 s). So a 12 s gap
 * could not fail here; 35 s can. Bun only starts counting once body bytes have been written,
 * so the silence must come after a first chunk: no `[[mock]]` directive shapes that (its
 * pause comes before every event), hence a hand-written upstream stream below.
 */
const QUIET_MS = 35_000;
const QUIET_USAGE = { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12, cost: 0.0000123 };

/** An OpenRouter-shaped stream: a first chunk at once, QUIET_MS of nothing, then the rest. */
function quietUpstream(request: Request): Response | undefined {
  if (!new URL(request.url).pathname.endsWith("/chat/completions")) return undefined;
  const id = "gen-quiet-0001";
  const created = Math.floor(Date.now() / 1000);
  const choice = (delta: object, finish: string | null = null) => ({ index: 0, delta, finish_reason: finish, native_finish_reason: finish, logprobs: null });
  const frame = (choices: object[], extra: object = {}) =>
    `data: ${JSON.stringify({ id, provider: "Quiet", model: MODEL, object: "chat.completion.chunk", created, choices, ...extra })}\n\n`;
  const parts = [
    frame([choice({ role: "assistant", content: "Hello" })]),
    frame([choice({ content: " world" })]) + frame([choice({ content: "" }, "stop")]) + frame([], { usage: QUIET_USAGE }) + "data: [DONE]\n\n",
  ];
  let step = 0;
  let timer: Timer | undefined;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (step === 1) await new Promise((resolve) => (timer = setTimeout(resolve, QUIET_MS)));
      const part = parts[step++];
      if (part === undefined) controller.close();
      else controller.enqueue(new TextEncoder().encode(part));
    },
    cancel: () => clearTimeout(timer),
  });
  return new Response(body, { headers: { "content-type": "text/event-stream", "x-generation-id": id } });
}

const chatBody = (directive: string, extra: Record<string, unknown> = {}) => ({
  model: MODEL,
  messages: [{ role: "user", content: `Tell me something. ${directive}` }],
  stream: true,
  ...extra,
});

let stack: ProxyStack;
let quietStack: ProxyStack;
let quiet: Promise<{ status: number; text: string; requestId: string | null }>;

beforeAll(async () => {
  stack = await startProxyStack({ env: { DISCONNECT_DRAIN_MS: "2000" } });
  for (const user of ["unbuffered", "aborts", "aborts-stalled", "spec"]) await stack.connect(user, 5);
  // The quiet stream has a proxy of its own and runs in the background while the other
  // tests run; its test, last in the file, waits for it.
  quietStack = await startProxyStack({ intercept: quietUpstream });
  await quietStack.connect("quiet", 5);
  quiet = (async () => {
    const res = await quietStack.chat("quiet", chatBody("Take your time."));
    return { status: res.status, text: await res.text(), requestId: res.headers.get("x-request-id") };
  })();
  quiet.catch(() => {});
});

afterAll(async () => {
  await quiet?.catch(() => {});
  await Promise.all([stack?.stop(), quietStack?.stop()]);
});

describe("streams through a real proxy process", () => {
  test("not buffered: the client holds the first content chunk while the upstream still withholds the second", async () => {
    // The mock pauses 2 s before each event; its served entry counts the content it has sent.
    const res = await stack.chat("unbuffered", chatBody("[[mock tokens=2 chunks=2 pause_ms=2000]]"));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = new SseReader(res);
    const first = await events.untilContent();
    expect(first.content).toBe(completionText(1));
    const served = stack.mock.served.find((s) => s.id === first.id)!;
    expect(served).toBeDefined();
    // Had the proxy buffered, the first chunk would only arrive after the whole stream.
    expect(served.deliveredTokens).toBe(1);
    expect(served.completed).toBe(false);
    const text = await events.rest();
    expect(served.deliveredTokens).toBe(2);
    expect(served.completed).toBe(true);
    const stream = checkChatStream(text);
    expect(stream.problems).toEqual([]);
    expect(stream.done).toBe(true);
  });

  test("a client that aborts mid-stream is still charged: the proxy drains the upstream for the usage", async () => {
    const abort = new AbortController();
    const res = await stack.chat("aborts", chatBody("[[mock tokens=6 pause_ms=100]]"), { signal: abort.signal });
    const events = new SseReader(res);
    const first = await events.untilContent();
    abort.abort();
    const [row] = await stack.waitForUsage("aborts", 1);
    const served = stack.mock.served.find((s) => s.id === first.id)!;
    expect(row).toMatchObject({ generationId: first.id, status: "client_disconnected", source: "upstream", streamed: true });
    expect(row!.costUsd).toBeGreaterThan(0);
    expect(nano(row!.costUsd)).toBe(nano(served.costUsd));
    // The upstream was read to its end after the client left (that is where the usage was).
    expect(served.completed).toBe(true);
    expect((await stack.status("aborts")).usage.monthlyUsd).toBe(row!.costUsd);
  });

  test("a client that aborts while the upstream stalls is charged what the upstream's record says, never $0", async () => {
    const abort = new AbortController();
    const res = await stack.chat("aborts-stalled", chatBody("[[mock tokens=6 stall_mid_stream after=1]]"), { signal: abort.signal });
    const events = new SseReader(res);
    const first = await events.untilContent();
    abort.abort();
    // After DISCONNECT_DRAIN_MS without a usage chunk the proxy gives up reading and the
    // reconciler settles the call from the upstream's record of the generation.
    const [row] = await stack.waitForUsage("aborts-stalled", 1);
    const served = stack.mock.served.find((s) => s.id === first.id)!;
    expect(row).toMatchObject({ generationId: first.id, status: "client_disconnected", source: "generation" });
    expect(nano(row!.costUsd)).toBe(nano(served.costUsd));
    expect(row!.costUsd).toBeGreaterThan(0);
    // ...and lets go of the upstream.
    await eventually("the proxy aborted the stalled upstream request", () => served.aborted);
    expect(served.completed).toBe(false);
  });

  describe("every relayed body validates against OpenRouter's response schemas", () => {
    const streams: Array<[string, string, { done: boolean; comments?: boolean }]> = [
      ["usage in a chunk with choices: []", "[[mock tokens=5]]", { done: true }],
      ["usage in a chunk with one empty choice", "[[mock tokens=5 usage_shape=empty_choice]]", { done: true }],
      ["usage on the finish_reason chunk", "[[mock tokens=5 usage_shape=in_finish]]", { done: true }],
      ["keep-alive comments", "[[mock tokens=2 pause_ms=40 keepalive_ms=15]]", { done: true, comments: true }],
      ["CRLF line ends", "[[mock tokens=4 crlf]]", { done: true }],
      ["frames split across writes", "[[mock tokens=4 split_frames]]", { done: true }],
      ["usage without cost", "[[mock tokens=4 no_cost]]", { done: true }],
      ["a mid-stream error chunk", "[[mock tokens=6 mid_stream_error after=2]]", { done: false }],
    ];
    for (const [name, directive, expected] of streams) {
      test(`stream: ${name}`, async () => {
        const res = await stack.chat("spec", chatBody(directive));
        expect(res.status).toBe(200);
        expect(res.headers.get("content-type")).toContain("text/event-stream");
        const stream = checkChatStream(await res.text());
        expect(stream.problems).toEqual([]);
        expect(stream.chunks.length).toBeGreaterThan(1);
        expect(stream.done).toBe(expected.done);
        if (expected.comments) expect(stream.events).toContainEqual({ comment: "OPENROUTER PROCESSING" });
        if (expected.done) expect(stream.chunks.some((c) => c.usage !== undefined)).toBe(true);
      });
    }

    for (const [name, directive] of [
      ["a completion with usage", "[[mock tokens=5]]"],
      ["a completion without cost", "[[mock tokens=5 no_cost]]"],
      ["a completion cut by max_tokens", "[[mock tokens=50]]"],
    ] as const) {
      test(`JSON: ${name}`, async () => {
        const res = await stack.chat("spec", { ...chatBody(directive, { stream: false }), max_tokens: 20 });
        expect(res.status).toBe(200);
        expect(res.headers.get("content-type")).toContain("application/json");
        const body = await res.json();
        expect(validateChatCompletion(body)).toEqual([]);
        expect(res.headers.get("x-generation-id")).toBe((body as { id: string }).id);
      });
    }
  });
});

describe("SIGTERM while a stream is open", () => {
  let own: ProxyStack;

  beforeAll(async () => {
    own = await startProxyStack({ env: { LOG_LEVEL: "info" } });
    await own.connect("late", 5);
  });

  afterAll(async () => {
    await own?.stop();
  });

  test("new connections are refused, the open stream completes, the row is written, exit code 0", async () => {
    const res = await own.chat("late", chatBody("[[mock tokens=2 chunks=2 pause_ms=1000]]"));
    const requestId = res.headers.get("x-request-id")!;
    const events = new SseReader(res);
    const first = await events.untilContent();
    const served = own.mock.served.find((s) => s.id === first.id)!;

    own.server.proc.kill("SIGTERM");
    await eventually("the proxy stopped accepting connections", async () => {
      try {
        await fetch(`${own.server.baseUrl}/healthz`, { keepalive: false });
        return false;
      } catch {
        return true;
      }
    });
    // Shutdown began while the upstream was still producing this stream.
    expect(served.completed).toBe(false);

    const stream = checkChatStream(await events.rest());
    expect(stream.problems).toEqual([]);
    expect(stream.done).toBe(true);
    const content = stream.chunks.map((c) => (c.choices as Array<{ delta?: { content?: string } }>)[0]?.delta?.content ?? "").join("");
    expect(content).toBe(completionText(2));

    expect(await own.stopServer()).toBe(0);
    const row = readLedgerRow(own.databasePath, requestId);
    expect(row).toMatchObject({ generation_id: first.id, status: "ok", source: "upstream", cost_nano: nano(served.costUsd) });
    expect(own.server.logLines().some((l) => l.msg === "stopped")).toBe(true);
  });
});

describe("idle timeout", () => {
  test(`a stream quiet for ${QUIET_MS / 1000} s after its first chunk outlives the server's idle timeout`, async () => {
    const { status, text, requestId } = await quiet;
    expect(status).toBe(200);
    const stream = checkChatStream(text);
    expect(stream.problems).toEqual([]);
    expect(stream.done).toBe(true);
    const content = stream.chunks.map((c) => (c.choices as Array<{ delta?: { content?: string } }>)[0]?.delta?.content ?? "").join("");
    expect(content).toBe("Hello world");
    expect(stream.chunks[stream.chunks.length - 1]!.usage).toEqual(QUIET_USAGE);
    const [row] = await quietStack.waitForUsage("quiet", 1);
    expect(row).toMatchObject({ requestId, generationId: "gen-quiet-0001", status: "ok", source: "upstream" });
    expect(nano(row!.costUsd)).toBe(nano(QUIET_USAGE.cost));
  });
});
