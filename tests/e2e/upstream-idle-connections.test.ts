/**
 * A call must not be lost to a pooled connection the upstream closed while it was idle
 * (issue 56: one was, after a store outage had left every connection idle past the
 * upstream's 5 s keep-alive; it failed before any answer and was charged its reservation,
 * though the upstream never had it). A real proxy process (the bundle) calls the mock
 * upstream over HTTP through a relay that stands for an upstream with a 1 s keep-alive,
 * met at the worst moment: a request written onto a connection idle past it is reset and
 * never delivered (tests/helpers/idle-closing-relay.ts). After each idle gap longer than
 * that keep-alive, a call must reach the upstream and succeed: the proxy reuses an idle
 * connection only within UPSTREAM_IDLE_REUSE_MS (src/upstream/idle-bounded-fetch.ts), and
 * opens a fresh one after. Nothing is ever sent twice: each call is served once.
 *
 * The gaps are the scenario, not a bound on speed: a slower machine only makes them longer.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { startMockUpstream, type RunningMockUpstream } from "../../packages/mock-upstream/src";
import { startIdleClosingRelay, type IdleClosingRelay } from "../helpers/idle-closing-relay";
import { cliCreateApp, connectOverHttp, startServer, tempDatabase, type RunningServer } from "../helpers/server";

setDefaultTimeout(60_000);

/** The upstream's keep-alive: an idle connection is closed after this. */
const KEEP_ALIVE_MS = 1000;
/** The proxy's bound on reusing an idle connection, set under the upstream's keep-alive. */
const IDLE_REUSE_MS = 400;
/** The quiet time before each call: longer than the keep-alive, so every pooled connection is closed. */
const IDLE_GAP_MS = 1500;

const db = tempDatabase();
let mock: RunningMockUpstream;
let relay: IdleClosingRelay;
let server: RunningServer;
let secretKey = "";

beforeAll(async () => {
  mock = await startMockUpstream();
  const { port, pathname } = new URL(mock.url);
  relay = startIdleClosingRelay(Number(port), KEEP_ALIVE_MS);
  ({ secretKey } = await cliCreateApp(db.databaseUrl, "idle app"));
  server = await startServer({
    databaseUrl: db.databaseUrl,
    env: {
      UPSTREAM_BASE_URL: `${relay.url}${pathname}`,
      UPSTREAM_API_KEY: "sk-or-e2e",
      UPSTREAM_IDLE_REUSE_MS: String(IDLE_REUSE_MS),
      USAGE_FLUSH_MS: "10",
      LOG_LEVEL: "warn",
    },
  });
  await connectOverHttp(server, secretKey, "alice", 5);
});

afterAll(async () => {
  await server?.stop();
  relay?.stop();
  await mock?.stop();
  db.cleanup();
});

const chat = (stream: boolean) =>
  server.fetch("/api/v1/chat/completions", {
    method: "POST",
    headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/json", "x-service-user": "alice" },
    body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 20, stream }),
  });

test("after each idle gap longer than the upstream's keep-alive, a call (JSON or streamed) reaches the upstream once and succeeds", async () => {
  const servedBefore = mock.mock.served.length;
  const outcomes: Array<{ status: number; body: string }> = [];
  for (const stream of [false, true, false, true]) {
    await Bun.sleep(IDLE_GAP_MS);
    const res = await chat(stream);
    outcomes.push({ status: res.status, body: await res.text() });
  }
  expect(outcomes.map((o) => o.status)).toEqual([200, 200, 200, 200]);
  expect(outcomes[1]!.body).toEndWith("data: [DONE]\n\n");
  expect(relay.lost).toBe(0);
  expect(mock.mock.served.length - servedBefore).toBe(4);

  const usage = await server.fetch("/api/v1/usage?appUserId=alice", { headers: { authorization: `Bearer ${secretKey}` } });
  const rows = ((await usage.json()) as { data: Array<{ status: string; source: string }> }).data;
  expect(rows.map((r) => [r.status, r.source])).toEqual(Array.from({ length: 4 }, () => ["ok", "upstream"]));
});
