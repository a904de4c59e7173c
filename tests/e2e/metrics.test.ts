/**
 * GET /metrics of a real server, parsed by a Prometheus text-format parser: behind its
 * token, and the counters move with a scripted session (chat JSON and SSE, a budget
 * refusal, an upstream failure), with histograms for latency and time to first byte.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
// @ts-expect-error: the parser ships no type declarations; its output is checked below.
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { cliCreateApp, connectOverHttp, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { pollUntil } from "../helpers/cluster";

interface Family {
  name: string;
  type: string;
  metrics: Array<{ labels?: Record<string, string>; value?: string; count?: string; buckets?: Record<string, string> }>;
}

const TOKEN = "metrics-token-0123456789";
const db = tempDatabase();
let server: RunningServer;
let secretKey = "";
let appId = "";

beforeAll(async () => {
  ({ secretKey, appId } = await cliCreateApp(db.databaseUrl, "measured app"));
  server = await startServer({ databaseUrl: db.databaseUrl, env: { METRICS_TOKEN: TOKEN } });
  await connectOverHttp(server, secretKey, "alice", 5);
  await connectOverHttp(server, secretKey, "poor", 0.000001);
});
afterAll(async () => {
  await server?.stop();
  db.cleanup();
});

async function scrape(): Promise<Map<string, Family>> {
  const res = await server.fetch("/metrics", { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toStartWith("text/plain");
  const families = parsePrometheusTextFormat(await res.text()) as Family[];
  return new Map(families.map((f) => [f.name, f]));
}

const value = (m: Map<string, Family>, name: string, labels: Record<string, string> = {}) =>
  Number(m.get(name)?.metrics.find((x) => Object.entries(labels).every(([k, v]) => x.labels?.[k] === v))?.value ?? 0);

const chat = (user: string, content: string, stream: boolean) =>
  server.fetch("/api/v1/chat/completions", {
    method: "POST",
    headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/json", "x-service-user": user },
    body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content }], max_tokens: 16, stream }),
  });

test("without the token, or with an app's secret key: 401 in the one error envelope", async () => {
  const withKey = await server.fetch("/metrics", { headers: { authorization: `Bearer ${secretKey}` } });
  expect(withKey.status).toBe(401);
  const res = await server.fetch("/metrics");
  expect(res.status).toBe(401);
  expect(((await res.json()) as { error: { code: string } }).error.code).toBe("auth");
});

test("the counters move with a scripted session", async () => {
  const before = await scrape();
  for (const [user, content, stream] of [
    ["alice", "hi [[mock tokens=3]]", false],
    ["alice", "hi [[mock tokens=3]]", true],
    ["poor", "too poor", false],
    ["alice", "fail [[mock status=500]]", false],
  ] as const) {
    await (await chat(user, content, stream)).text();
  }
  // A request is counted by its after-response hook, which may run after its client has the
  // answer: a stream's once it is metered, a 502's a moment after. So wait until all four are in.
  const chatRequests = (m: Map<string, Family>) =>
    (m.get("proxy_requests_total")?.metrics ?? []).filter((x) => x.labels?.route === "/api/v1/chat/completions").reduce((sum, x) => sum + Number(x.value), 0);
  const after = await pollUntil("all four calls counted", async () => {
    const m = await scrape();
    return chatRequests(m) - chatRequests(before) === 4 ? m : undefined;
  });
  const delta = (name: string, labels: Record<string, string> = {}) => value(after, name, labels) - value(before, name, labels);
  expect(delta("proxy_requests_total", { route: "/api/v1/chat/completions", status: "402" })).toBe(1);
  expect(delta("proxy_requests_total", { route: "/api/v1/chat/completions", status: "502" })).toBe(1);
  expect(delta("proxy_budget_refusals_total", { code: "budget_exceeded" })).toBe(1);
  expect(delta("proxy_upstream_errors_total", { code: "upstream" })).toBe(1);
  expect(delta("proxy_spend_usd_total", { app: appId })).toBeGreaterThan(0);
  // The mock's usage can be true: none of these calls was charged at its reservation for it.
  expect(after.get("proxy_upstream_usage_invalid_total")?.type).toBe("COUNTER");
  expect(delta("proxy_upstream_usage_invalid_total")).toBe(0);
  // parse-prometheus-text-format mangles labelled histograms (it keeps one bucket set and
  // drops the labels), so their `_count` series are read from the text itself.
  const text = await (await server.fetch("/metrics", { headers: { authorization: `Bearer ${TOKEN}` } })).text();
  // Every chat call has a duration; only the served ones (JSON and SSE) a first byte.
  const expected = { proxy_chat_duration_seconds: { true: 1, false: 3 }, proxy_chat_time_to_first_byte_seconds: { true: 1, false: 1 } };
  for (const [name, want] of Object.entries(expected)) {
    expect(after.get(name)!.type).toBe("HISTOGRAM");
    const counts = [...text.matchAll(new RegExp(`^${name}_count\\{stream="(true|false)"\\} (\\d+)$`, "gm"))];
    expect(Object.fromEntries(counts.map((m) => [m[1], Number(m[2])]))).toEqual(want);
  }
  for (const name of [
    "proxy_usage_writer_pending_rows",
    "proxy_usage_writer_failed_flushes",
    "proxy_rate_limit_fallback_checks",
    "proxy_open_streams",
    "proxy_webhook_delivered",
    "proxy_webhook_failed_attempts",
  ]) {
    expect(after.get(name)?.type).toBe("GAUGE");
  }
});
