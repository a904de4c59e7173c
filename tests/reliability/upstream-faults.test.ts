/**
 * Upstream faults against a real proxy process (the bundle) in front of the mock
 * upstream served over HTTP: connection refused, reset and stall (before headers and
 * mid-body), malformed or unusual SSE, missing usage, HTTP 200 with `{error}`.
 *
 * For every fault the client gets either the 502 `upstream` envelope (nothing was relayed
 * yet) or, once a 200 stream has begun, an end: a clean one when the upstream's stream ended
 * (the proxy passes the bytes through, however odd), a cut one when the upstream's
 * connection failed (the proxy cannot change a status it already sent, and a cleanly closed
 * stream would look complete; the cut tells the client it was not). Every call leaves
 * exactly one ledger row with the right status and cost: $0 only where the call provably
 * never reached the upstream (refused), else what the upstream billed, read from its record
 * of the generation where the usage never came (`generation`), or the whole reservation
 * where nothing names a generation to look up (`reservation`); and the process stays up.
 *
 * No timing thresholds: the upstream timeout is set small so stalls end quickly, and every
 * wait is for an outcome.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { checkChatStream, validateChatCompletion } from "../helpers/openrouter-spec";
import { eventually, nano, startProxyStack, type ProxyStack } from "../helpers/proxy-stack";
import { freePort } from "../helpers/server";
import { completionText } from "../../packages/mock-upstream/src";
import { paddingText } from "../../packages/mock-upstream/src/wire-shapes";
import { bytesTheMockSent, call, peakRssMb, rowOf, rssMb, type CallOutcome } from "./fault-client";

setDefaultTimeout(60_000);

/** Short, so stalls are cut within a test; well above what a healthy local call needs. */
const UPSTREAM_TIMEOUT_MS = 1500;
/** The mock's clock, fixed so its bytes can be replayed exactly (bytesTheMockSent). */
const now = () => 1_800_000_000_000;
const ONE_MB = 1024 * 1024;

let stack: ProxyStack;
let refused: ProxyStack;
let userSeq = 0;

/** A fresh user with a budget, so each call's ledger rows are its own. */
async function user(s: ProxyStack = stack): Promise<string> {
  const name = `u${++userSeq}`;
  await s.connect(name, 20);
  return name;
}

const text = (o: CallOutcome) => new TextDecoder().decode(o.bytes);
const servedFor = (s: ProxyStack, from: number) => {
  const served = s.servedSince(from);
  expect(served).toHaveLength(1);
  return served[0]!;
};

function expectUpstreamEnvelope(o: CallOutcome): void {
  expect(o.status).toBe(502);
  expect(o.cut).toBeNull();
  const body = JSON.parse(text(o)) as { error: { code: string; message: string } };
  expect(body.error.code).toBe("upstream");
  expect(typeof body.error.message).toBe("string");
}

async function expectHealthy(s: ProxyStack): Promise<void> {
  expect(s.server.proc.exitCode).toBeNull();
  expect((await s.server.fetch("/healthz")).status).toBe(200);
}

beforeAll(async () => {
  const env = { UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS), DISCONNECT_DRAIN_MS: "1000", RL_CHAT_LIMIT: "10000", RECONCILE_POLL_MS: "50" };
  [stack, refused] = await Promise.all([
    startProxyStack({ env, mock: { now } }),
    // Nobody listens there: every upstream call is refused (the catalogue too: fallback prices).
    startProxyStack({ env: { ...env, UPSTREAM_BASE_URL: `http://127.0.0.1:${freePort()}/api/v1` } }),
  ]);
});

afterAll(async () => {
  await Promise.all([stack?.stop(), refused?.stop()]);
});

describe("the upstream fails before anything is relayed: 502 upstream; $0 only when it was never reached", () => {
  for (const stream of [false, true]) {
    const kind = stream ? "stream" : "JSON";

    test(`${kind}: connection refused`, async () => {
      const u = await user(refused);
      const o = await call(refused, u, "", stream);
      expectUpstreamEnvelope(o);
      expect(JSON.parse(text(o)).error.message).toContain("could not reach the upstream");
      const row = await rowOf(refused, u, o.requestId);
      expect(row).toMatchObject({ status: "upstream_unreachable", costUsd: 0, streamed: stream });
      expect(await refused.usage(u)).toHaveLength(1);
      await expectHealthy(refused);
    });

    test(`${kind}: stall before headers: the client is answered after UPSTREAM_TIMEOUT_MS, the call charged its reservation`, async () => {
      const u = await user();
      const from = stack.mock.served.length;
      const o = await call(stack, u, "[[mock stall_before_headers]]", stream);
      expectUpstreamEnvelope(o);
      expect(JSON.parse(text(o)).error.message).toContain("timed out");
      // No answer ever came, so nothing names a generation: the reservation, never less.
      const row = await rowOf(stack, u, o.requestId);
      expect(row).toMatchObject({ status: "upstream_timeout", source: "reservation" });
      expect(row.costUsd).toBe(row.reservedUsd!);
      // The proxy let go of the upstream request once DISCONNECT_DRAIN_MS had passed.
      const served = servedFor(stack, from);
      await eventually("the stalled upstream request was aborted", () => served.aborted);
      await expectHealthy(stack);
    });

    test(`${kind}: HTTP 200 whose body is {error}`, async () => {
      const u = await user();
      const o = await call(stack, u, "[[mock error_200]]", stream);
      expectUpstreamEnvelope(o);
      expect(JSON.parse(text(o)).error.message).toContain("HTTP 200");
      // A generation began (its id is in the header) and ended in an error: its record says
      // what was billed, which for an error finish is no tokens (OpenRouter's zero completion insurance).
      expect(await rowOf(stack, u, o.requestId)).toMatchObject({ status: "upstream_error", source: "generation", costUsd: 0 });
      await expectHealthy(stack);
    });
  }

  // A JSON body cut halfway: the generation ran upstream and is billed in full whether or not
  // its answer arrives (OpenRouter's streaming page, on non-streaming requests), so the row
  // is what the upstream's record says. The 502 tells the client not to retry it.
  for (const [fault, directive, status] of [
    ["reset", "[[mock tokens=40 reset_mid_stream]]", "upstream_reset"],
    ["stall", "[[mock tokens=40 stall_mid_stream]]", "upstream_timeout"],
  ] as const) {
    test(`JSON: ${fault} halfway through the body`, async () => {
      const u = await user();
      const from = stack.mock.served.length;
      const o = await call(stack, u, directive, false);
      expectUpstreamEnvelope(o);
      const served = servedFor(stack, from);
      const row = await rowOf(stack, u, o.requestId);
      expect(row).toMatchObject({ status, source: "generation", generationId: served.id, streamed: false });
      expect(nano(row.costUsd)).toBe(nano(served.costUsd));
      expect(served.completed).toBe(false);
      await expectHealthy(stack);
    });
  }
});

describe("the upstream fails mid-stream: the client's stream is cut, the row is the upstream's record", () => {
  for (const [fault, directive, status] of [
    ["connection reset", "[[mock tokens=8 reset_mid_stream after=3]]", "upstream_reset"],
    ["stall (no bytes for UPSTREAM_TIMEOUT_MS)", "[[mock tokens=8 stall_mid_stream after=3]]", "upstream_stalled"],
  ] as const) {
    test(fault, async () => {
      const u = await user();
      const from = stack.mock.served.length;
      const o = await call(stack, u, directive, true);
      expect(o.status).toBe(200);
      expect(o.cut).not.toBeNull();
      // What came before the cut is intact: the role chunk and the 3 content chunks.
      const stream = checkChatStream(text(o));
      expect(stream.problems).toEqual([]);
      expect(stream.done).toBe(false);
      const content = stream.chunks.map((c: any) => c.choices[0]?.delta?.content ?? "").join("");
      expect(content).toBe(completionText(3));
      const row = await rowOf(stack, u, o.requestId);
      const served = servedFor(stack, from);
      expect(row).toMatchObject({ status, source: "generation", generationId: served.id, streamed: true });
      expect(nano(row.costUsd)).toBe(nano(served.costUsd));
      expect(row.costUsd).toBeGreaterThan(0);
      expect(await stack.usage(u)).toHaveLength(1);
      expect(served.completed).toBe(false);
      if (status === "upstream_stalled") await eventually("the stalled upstream was let go", () => served.aborted);
      await expectHealthy(stack);
    });
  }

  test("a mid-stream error chunk is relayed and the stream ends cleanly; the row is the upstream's record", async () => {
    const u = await user();
    const from = stack.mock.served.length;
    const o = await call(stack, u, "[[mock tokens=8 mid_stream_error after=3]]", true);
    expect(o.status).toBe(200);
    expect(o.cut).toBeNull();
    const stream = checkChatStream(text(o));
    expect(stream.problems).toEqual([]);
    expect((stream.chunks.at(-1) as { error?: unknown }).error).toBeDefined();
    const row = await rowOf(stack, u, o.requestId);
    const served = servedFor(stack, from);
    expect(row).toMatchObject({ status: "upstream_error_mid_stream", source: "generation", generationId: served.id });
    expect(nano(row.costUsd)).toBe(nano(served.costUsd));
  });
});

describe("odd but complete streams pass through byte for byte and are metered exactly", () => {
  const shapes: Array<[string, string]> = [
    ["frames split across writes (inside `data:`, inside UTF-8, between CR and LF)", "[[mock tokens=12 split_frames crlf]]"],
    ["CRLF line ends", "[[mock tokens=12 crlf]]"],
    ["comments between and inside events", "[[mock tokens=12 comments]]"],
    ["every event over several data: lines, the usage too", "[[mock tokens=12 multiline_data]]"],
    ["multi-line data with CRLF and split writes", "[[mock tokens=12 multiline_data crlf split_frames]]"],
    ["an event with bad JSON", "[[mock tokens=12 bad_json]]"],
    ["a 1 MB data line", `[[mock tokens=12 big_line=${ONE_MB}]]`],
    ["no [DONE]", "[[mock tokens=12 no_done]]"],
  ];
  for (const [name, directive] of shapes) {
    test(name, async () => {
      const u = await user();
      const from = stack.mock.served.length;
      const o = await call(stack, u, directive, true);
      expect(o.status).toBe(200);
      expect(o.contentType).toContain("text/event-stream");
      expect(o.cut).toBeNull();
      const served = servedFor(stack, from);
      expect(served.completed).toBe(true);
      expect(Buffer.from(o.bytes).equals(Buffer.from(await bytesTheMockSent(served, now)))).toBe(true);
      const row = await rowOf(stack, u, o.requestId);
      expect(row).toMatchObject({ status: "ok", source: "upstream", generationId: served.id, completionTokens: 12 });
      expect(nano(row.costUsd)).toBe(nano(served.costUsd));
      expect(await stack.usage(u)).toHaveLength(1);
    });
  }

  test("the 1 MB line reaches the client whole: its content is the words plus the mock's padding", async () => {
    const u = await user();
    const o = await call(stack, u, `[[mock tokens=3 big_line=${ONE_MB}]]`, true);
    const big = text(o)
      .split("\n")
      .find((l) => l.length > 1000)!;
    expect(new TextEncoder().encode(big).length).toBe(ONE_MB);
    const content: string = JSON.parse(big.slice("data: ".length)).choices[0].delta.content;
    const padding = content.slice(completionText(1).length);
    expect(content.startsWith(completionText(1))).toBe(true);
    expect(padding).toBe(paddingText(new TextEncoder().encode(padding).length));
  });
});

describe("the usage never comes: the row is the upstream's record of the generation", () => {
  test("stream without a usage chunk: clean end, the record's (non-zero) cost", async () => {
    const u = await user();
    const from = stack.mock.served.length;
    const o = await call(stack, u, "[[mock tokens=12 no_usage]]", true);
    expect(o.status).toBe(200);
    expect(o.cut).toBeNull();
    const stream = checkChatStream(text(o));
    expect(stream.problems).toEqual([]);
    expect(stream.done).toBe(true);
    const row = await rowOf(stack, u, o.requestId);
    expect(row).toMatchObject({ status: "ok", source: "generation" });
    expect(nano(row.costUsd)).toBe(nano(servedFor(stack, from).costUsd));
    expect(row.costUsd).toBeGreaterThan(0);
  });

  test("JSON without usage: 200 with the completion, the record's (non-zero) cost", async () => {
    const u = await user();
    const from = stack.mock.served.length;
    const o = await call(stack, u, "[[mock tokens=12 no_usage]]", false);
    expect(o.status).toBe(200);
    const body = JSON.parse(text(o));
    expect(validateChatCompletion(body)).toEqual([]);
    expect(body.choices[0].message.content).toBe(completionText(12));
    const row = await rowOf(stack, u, o.requestId);
    expect(row).toMatchObject({ status: "ok", source: "generation" });
    expect(nano(row.costUsd)).toBe(nano(servedFor(stack, from).costUsd));
    expect(row.costUsd).toBeGreaterThan(0);
  });
});

describe("memory stays bounded", () => {
  test("50 streams with a 1 MB line each (10 at a time) grow the proxy by less than 64 MB", async () => {
    const u = await user();
    const pid = stack.server.proc.pid;
    const round = async (count: number) => {
      const outcomes = await Promise.all(Array.from({ length: count }, () => call(stack, u, `[[mock tokens=4 big_line=${ONE_MB}]]`, true)));
      for (const o of outcomes) {
        expect(o.status).toBe(200);
        expect(o.cut).toBeNull();
        expect(o.bytes.length).toBeGreaterThan(ONE_MB);
      }
    };
    // Warm up first (JIT, allocator arenas, socket buffers), then measure.
    await round(10);
    const before = rssMb(pid);
    const perRound: string[] = [];
    for (let i = 0; i < 5; i++) {
      await round(10);
      perRound.push(rssMb(pid).toFixed(1));
    }
    const after = rssMb(pid);
    console.log(
      `[memory] proxy RSS before ${before.toFixed(1)} MB, after 50 × 1 MB-line streams ${after.toFixed(1)} MB (growth ${(after - before).toFixed(1)} MB; after each round of 10: ${perRound.join(", ")}), peak ${peakRssMb(pid).toFixed(1)} MB`,
    );
    expect(after - before).toBeLessThan(64);
    const rows = await stack.waitForUsage(u, 60);
    expect(rows.every((r) => r.status === "ok" && r.source === "upstream")).toBe(true);
    await expectHealthy(stack);
  });
});

test("no error-level log lines, and both processes are still up", async () => {
  await expectHealthy(stack);
  await expectHealthy(refused);
  for (const s of [stack, refused]) {
    const errors = s.server.logLines().filter((l) => l.level === "error");
    expect(errors).toEqual([]);
  }
  // Bun prints the reason of a response body stream that errors (the relay errors the
  // client's stream on an upstream reset or stall, see the report): exactly those two, and
  // nothing for the faults that ended cleanly or before the headers.
  const printed = stack.server.stderr.filter((l) => /^\w*(Error|error):/.test(l));
  expect(printed).toHaveLength(2);
  expect(printed.some((l) => l.includes("ECONNRESET"))).toBe(true);
  expect(printed.some((l) => l.includes("upstream stalled"))).toBe(true);
  expect(refused.server.stderr).toEqual([]);
});
