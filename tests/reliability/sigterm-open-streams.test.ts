/**
 * SIGTERM with many streams open (ARCHITECTURE.md §4: stop accepting, finish in-flight streams
 * within a bound, flush usage, exit 0), against a real proxy process in front of the mock
 * upstream served over HTTP. What the proxy wrote is read from its SQLite file after exit
 * and compared with the mock's own log of what it served: nothing may be lost.
 *
 * No timing thresholds: "open at the signal" and "cut before its end" are read off the
 * mock's log (`completed`, `deliveredTokens`); waits are bounded only by the test timeout.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { Database } from "bun:sqlite";
import { checkChatStream } from "../helpers/openrouter-spec";
import { SseReader, eventually, nano, startProxyStack, type ProxyStack } from "../helpers/proxy-stack";
import { completionText } from "../../packages/mock-upstream/src";
import { readLedgerFile, sumRowsPerAccount } from "./ledger-file";

setDefaultTimeout(60_000);

const MODEL = "openai/gpt-4o-mini";
const STREAMS = 100;
const USERS = ["ada", "ben", "cyd", "dee"];
/**
 * Each stream pauses before each of its 4 events (role + 3 words): about 6 s from first
 * byte to [DONE]. That only has to exceed the time it takes to open 100 streams, and the
 * test checks that it did (every stream open and unfinished at the signal) rather than
 * assuming it.
 */
const TOKENS = 3;
const SLOW = `[[mock tokens=${TOKENS} pause_ms=1500]]`;

const streamBody = (n: number, directive: string) => ({
  model: MODEL,
  messages: [{ role: "user", content: `Stream number ${n}. ${directive}` }],
  stream: true,
});

/** True once a fresh TCP connection to the proxy is refused (no pooled socket reused). */
async function refusesConnections(baseUrl: string): Promise<boolean> {
  try {
    await fetch(`${baseUrl}/healthz`, { keepalive: false });
    return false;
  } catch {
    return true;
  }
}

const contentOf = (text: string) =>
  checkChatStream(text)
    .chunks.map((c) => (c.choices as Array<{ delta?: { content?: string } }>)[0]?.delta?.content ?? "")
    .join("");

describe(`SIGTERM while ${STREAMS} streams are open`, () => {
  let stack: ProxyStack;

  beforeAll(async () => {
    stack = await startProxyStack({ env: { LOG_LEVEL: "info", RL_CHAT_LIMIT: "1000", SHUTDOWN_GRACE_MS: "30000" } });
    for (const user of USERS) await stack.connect(user, 5);
  });

  afterAll(async () => {
    await stack?.stop();
  });

  test("refuses new connections, lets every stream finish, flushes one ledger row per served request, exits 0", async () => {
    const responses = await Promise.all(Array.from({ length: STREAMS }, (_, n) => stack.chat(USERS[n % USERS.length]!, streamBody(n, SLOW))));
    expect(responses.map((r) => r.status)).toEqual(responses.map(() => 200));
    // Read every body from now on, concurrently with the shutdown.
    const texts = responses.map((r) => new SseReader(r).rest());

    const served = await eventually("the mock received all the streams", () => stack.mock.served.length === STREAMS && stack.mock.served);
    // The precondition of the whole test: the signal lands while all of them are open.
    expect(served.filter((s) => s.completed)).toEqual([]);
    stack.server.proc.kill("SIGTERM");
    await eventually("the proxy refuses new connections", () => refusesConnections(stack.server.baseUrl));
    // Still true after the listener closed: shutdown began with every stream in flight.
    expect(served.filter((s) => s.completed).length).toBeLessThan(STREAMS);

    const bodies = await Promise.all(texts);
    for (const text of bodies) {
      const stream = checkChatStream(text);
      expect(stream.problems).toEqual([]);
      expect(stream.done).toBe(true);
      expect(contentOf(text)).toBe(completionText(TOKENS));
    }
    expect(served.every((s) => s.completed && !s.aborted)).toBe(true);

    expect(await stack.stopServer()).toBe(0);
    expect(stack.server.logLines().find((l) => l.msg === "stopped")).toMatchObject({ usageRowsWritten: STREAMS });

    const ledger = readLedgerFile(stack.databasePath);
    expect(ledger.integrity).toEqual(["ok"]);
    // Exactly one row per served request, matched on the upstream's generation id.
    const rowsByGeneration = new Map(ledger.rows.map((r) => [r.generation_id, r]));
    expect(ledger.rows.length).toBe(STREAMS);
    expect(rowsByGeneration.size).toBe(STREAMS);
    for (const s of served) {
      expect(rowsByGeneration.get(s.id)).toMatchObject({ status: "ok", source: "upstream", streamed: 1, cost_nano: nano(s.costUsd) });
    }
    expect(ledger.totals).toEqual(sumRowsPerAccount(ledger.rows));
    expect(ledger.totals.size).toBe(USERS.length);
  });
});

describe("SIGTERM with a stream that outlives SHUTDOWN_GRACE_MS", () => {
  let stack: ProxyStack;

  beforeAll(async () => {
    // The drain after a disconnect is far longer than the grace: the grace must still bound it.
    stack = await startProxyStack({ env: { LOG_LEVEL: "info", SHUTDOWN_GRACE_MS: "500", DISCONNECT_DRAIN_MS: "60000" } });
    await stack.connect("long", 5);
  });

  afterAll(async () => {
    await stack?.stop();
  });

  test("the process exits 0 before the stream's end; the cut stream stays journaled and the next start charges the upstream's record", async () => {
    // 40 words, 1 s apart: a stream of about 40 s, against a grace of 0.5 s.
    const res = await stack.chat("long", streamBody(0, "[[mock tokens=40 pause_ms=1000]]"));
    const requestId = res.headers.get("x-request-id")!;
    const events = new SseReader(res);
    const first = await events.untilContent();
    const served = stack.mock.served.find((s) => s.id === first.id)!;

    stack.server.proc.kill("SIGTERM");
    // The client's stream is cut (no [DONE]); it must end rather than hang.
    const text = await events.rest().catch(() => events.text);
    expect(checkChatStream(text).done).toBe(false);
    expect(await stack.stopServer()).toBe(0);
    // The process did not wait for the stream: the upstream had not finished it.
    expect(served.completed).toBe(false);
    expect(served.deliveredTokens).toBeLessThan(40);
    expect(stack.server.logLines().find((l) => l.msg === "shutdown grace is over: cutting the streams still open")).toMatchObject({ activeStreams: 1 });

    // Cut before its usage chunk: no guess is written. The call stays in the journal, with
    // its generation id, for whoever holds the store next.
    const ledger = readLedgerFile(stack.databasePath);
    expect(ledger.rows.find((r) => r.request_id === requestId)).toBeUndefined();
    expect(journalEntry(stack.databasePath, requestId)).toMatchObject({ generation_id: first.id, reconcile_reason: "client_disconnected" });

    // The next process holds it again at once and settles it from the upstream's record:
    // what the provider billed (it cannot cancel: the whole generation), never a silent $0.
    await stack.restartServer();
    const [row] = await stack.waitForUsage("long", 1);
    expect(row).toMatchObject({ requestId, generationId: first.id, source: "generation", status: "client_disconnected" });
    expect(nano(row!.costUsd)).toBe(nano(served.costUsd));
    expect(row!.costUsd).toBeGreaterThan(0);
    const status = await stack.status("long");
    expect(nano(status.usage.monthlyUsd)).toBe(nano(served.costUsd));
  });
});

/** The call journal's row for a request, read from the file after the process exited. */
function journalEntry(databasePath: string, requestId: string): Record<string, unknown> | null {
  const db = new Database(databasePath);
  try {
    return db.query<Record<string, unknown>, [string]>("SELECT * FROM call_journal WHERE request_id = ?").get(requestId);
  } finally {
    db.close();
  }
}
