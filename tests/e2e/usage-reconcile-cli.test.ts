/**
 * `cli usage reconcile`: the operator's check of the ledger against the upstream's books, on
 * a real proxy process's SQLite file and the mock upstream over HTTP. Every row with a
 * generation id is compared with the upstream's record of it; each difference is one JSON
 * line, then a summary; the exit status says whether any was found.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { E2E_UPSTREAM_KEY, startProxyStack, type ProxyStack } from "../helpers/proxy-stack";
import { runCliWithEnv } from "../helpers/server";

let stack: ProxyStack;
const today = new Date().toISOString().slice(0, 10);
const ask = (stream: boolean) => ({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi [[mock tokens=6]]" }], stream });

const reconcile = (env: Record<string, string> = {}) =>
  runCliWithEnv(
    { DATABASE_URL: `sqlite:${stack.databasePath}`, UPSTREAM_BASE_URL: stack.upstream.url, UPSTREAM_API_KEY: E2E_UPSTREAM_KEY, ...env },
    "usage",
    "reconcile",
    "--app",
    stack.appId,
    "--from",
    today,
    "--to",
    today,
  );

beforeAll(async () => {
  stack = await startProxyStack();
  await stack.connect("ivy", 5);
  for (const stream of [false, true, false]) {
    const res = await stack.chat("ivy", ask(stream));
    expect(res.status).toBe(200);
    await res.text();
  }
  await stack.waitForUsage("ivy", 3);
});

afterAll(async () => {
  await stack?.stop();
});

test("a ledger that agrees with the upstream's records: no difference, exit 0", async () => {
  const result = await reconcile();
  expect(result.code).toBe(0);
  expect(result.json).toHaveLength(1);
  const { summary } = result.json[0]!;
  expect(summary).toMatchObject({ rowsChecked: 3, differences: 0 });
  expect(summary.ledgerUsd).toBeCloseTo(summary.upstreamUsd, 9);
});

test("a row that disagrees is listed with both figures, and the exit status says so", async () => {
  const [row] = await stack.usage("ivy");
  const db = new Database(stack.databasePath);
  try {
    db.query("UPDATE usage_ledger SET cost_nano = cost_nano + 1000 WHERE request_id = ?").run(row!.requestId);
  } finally {
    db.close();
  }
  const result = await reconcile();
  expect(result.code).toBe(3);
  expect(result.json).toHaveLength(2);
  const [difference, last] = result.json;
  const summary = last!.summary;
  expect(difference).toMatchObject({ requestId: row!.requestId, generationId: row!.generationId, problem: "cost_differs" });
  expect(difference!.ledgerUsd - difference!.upstreamUsd).toBeCloseTo(0.000001, 9);
  expect(summary).toMatchObject({ rowsChecked: 3, differences: 1 });
});

test("without the upstream's key there is nothing to compare against: a usage error", async () => {
  const result = await reconcile({ UPSTREAM_API_KEY: "" });
  expect(result.code).toBe(2);
  expect(result.stderr).toContain("UPSTREAM_API_KEY");
});
