/**
 * Numbers from the upstream are checked (issue 56, src/pricing/usage-check.ts): a cost or
 * token count that is not a count (negative, fractional, not finite, past what integers hold
 * exactly) or is absurd for the call marks its row `upstream_usage_invalid`, is charged the
 * reservation, is logged and counted in /metrics, and never reaches a row, so /status and
 * /usage keep answering (both answered 400 for a user after a `cost: 1e300`). It holds for
 * a JSON answer (which the client gets as a 502: not an answer the proxy can vouch for), a
 * stream's usage chunk (relayed as it came: its status was sent), and the upstream's record
 * of a generation the reconciler settles from. An overrun that can be true (a price that
 * rose) is charged as billed, as before.
 */
import { describe, expect, test } from "bun:test";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";
import { errorOf } from "../helpers/test-app";
import type { FetchUpstream } from "../../src/upstream/client";
import type { UsageRow } from "../../src/budget/usage-row";

const METRICS_TOKEN = "metrics-token-0123456789";
const MODEL = "openai/gpt-4o-mini";
const ask = (stream = false) => ({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 50, stream });
const GOOD_USAGE = `{"prompt_tokens":9,"completion_tokens":3,"cost":0.0000042}`;

/**
 * An upstream that answers every chat with `usage` (raw JSON text, so that `1e400` can be
 * written), as JSON or as a stream, and keeps `record` (raw too) as its record of each generation.
 */
function upstreamReporting(state: { usage: string | null; record: string }): FetchUpstream {
  return async (url, init) => {
    if (url.includes("/generation?id=")) return new Response(`{"data":${state.record}}`, { headers: { "content-type": "application/json" } });
    const stream = (JSON.parse(String(init.body)) as { stream?: boolean }).stream === true;
    const headers = { "x-generation-id": "gen-1", "content-type": stream ? "text/event-stream" : "application/json" };
    const usage = state.usage === null ? "" : `,"usage":${state.usage}`;
    if (!stream) {
      const body = `{"id":"gen-1","object":"chat.completion","created":1,"model":"${MODEL}","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]${usage}}`;
      return new Response(body, { headers });
    }
    const chunk = (rest: string) => `data: {"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"${MODEL}"${rest}}\n\n`;
    return new Response(chunk(`,"choices":[{"index":0,"delta":{"content":"hi"}}]`) + chunk(`,"choices":[]${usage}`) + "data: [DONE]\n\n", { headers });
  };
}

async function appReporting(usage: string | null, record = `{"id":"gen-1","total_cost":0.0000042,"tokens_prompt":9,"tokens_completion":3}`) {
  const state = { usage, record };
  const t = await chatTestApp({ fetchUpstream: upstreamReporting(state), env: { METRICS_TOKEN, RL_CHAT_LIMIT: "1000" } });
  await t.connect("alice", 5);
  return { t, state };
}

async function rowOf(t: ChatTestApp, res: Response): Promise<UsageRow> {
  await t.flush();
  return (await t.deps.store.usageLedger.find(res.headers.get("x-request-id")!))!;
}

async function invalidCount(t: ChatTestApp): Promise<number> {
  const res = await t.app.handle(new Request("http://localhost/metrics", { headers: { authorization: `Bearer ${METRICS_TOKEN}` } }));
  return Number(/^proxy_upstream_usage_invalid_total (\S+)$/m.exec(await res.text())?.[1]);
}

/** The row is charged its reservation under the new status, and the user's reads still answer, with that amount. */
async function expectChargedAtReservation(t: ChatTestApp, row: UsageRow): Promise<void> {
  expect(row).toMatchObject({ status: "upstream_usage_invalid", source: "reservation", costNano: row.reservedNano!, overrunNano: 0 });
  expect(row.reservedNano).toBeGreaterThan(0);
  const status = await t.get("/api/v1/status?appUserId=alice");
  expect(status.status).toBe(200);
  expect(((await status.json()) as { usage: { monthlyUsd: number } }).usage.monthlyUsd).toBe(row.reservedNano! / 1e9);
  const usage = await t.get("/api/v1/usage?appUserId=alice");
  expect(usage.status).toBe(200);
  const [listed] = ((await usage.json()) as { data: Array<{ status: string; costUsd: number }> }).data;
  expect(listed).toMatchObject({ status: "upstream_usage_invalid", costUsd: row.reservedNano! / 1e9 });
  expect(t.logs.filter((l) => l.includes("usage that cannot be true"))).toHaveLength(1);
  expect(await invalidCount(t)).toBe(1);
}

/** Usage that cannot be true, each for its own reason. */
const IMPOSSIBLE: Array<[string, string]> = [
  ["a cost of 1e300 USD (infinite in nano-dollars)", `{"prompt_tokens":9,"completion_tokens":3,"cost":1e300}`],
  ["a cost JSON parses as Infinity", `{"prompt_tokens":9,"completion_tokens":3,"cost":1e400}`],
  ["a negative cost", `{"prompt_tokens":9,"completion_tokens":3,"cost":-0.001}`],
  ["a fractional token count", `{"prompt_tokens":9.5,"completion_tokens":3,"cost":0.0000042}`],
  ["a negative token count, without a cost", `{"prompt_tokens":9,"completion_tokens":-3}`],
  ["a token count past what integers hold exactly", `{"prompt_tokens":9,"completion_tokens":1e17}`],
  ["an absurd cost: $50 for a call that reserved a fraction of a cent", `{"prompt_tokens":9,"completion_tokens":3,"cost":50}`],
  ["absurd completion tokens for max_tokens 50", `{"prompt_tokens":9,"completion_tokens":10000000,"cost":0.0000042}`],
  ["absurd prompt tokens for a two-word prompt", `{"prompt_tokens":5000000,"completion_tokens":3}`],
];

describe("a JSON answer whose usage cannot be true: 502, charged its reservation", () => {
  for (const [why, usage] of IMPOSSIBLE) {
    test(why, async () => {
      const { t } = await appReporting(usage);
      const res = await t.chat(ask());
      const error = await errorOf(res);
      expect({ status: error.status, code: error.code }).toEqual({ status: 502, code: "upstream" });
      expect(error.message).toContain("cannot be true");
      expect(res.headers.get("x-should-retry")).toBe("false");
      await expectChargedAtReservation(t, await rowOf(t, res));
    });
  }

  test("with an Idempotency-Key, a retry gets the same 502 and is not charged again", async () => {
    const { t } = await appReporting(IMPOSSIBLE[0]![1]);
    const first = await t.chat(ask(), { "idempotency-key": "k-1" });
    expect(first.status).toBe(502);
    const retry = await t.chat(ask(), { "idempotency-key": "k-1" });
    expect(retry.status).toBe(502);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    await t.flush();
    expect(t.db.query<{ n: number }, []>("SELECT count(*) AS n FROM usage_ledger").get()!.n).toBe(1);
  });
});

describe("a stream whose usage chunk cannot be true: relayed as it came, charged its reservation", () => {
  for (const [why, usage] of IMPOSSIBLE) {
    test(why, async () => {
      const { t } = await appReporting(usage);
      const res = await t.chat(ask(true));
      expect(res.status).toBe(200);
      expect(await res.text()).toContain(`"usage":${usage}`);
      await t.app.decorator.chat.idle(10_000);
      await expectChargedAtReservation(t, await rowOf(t, res));
    });
  }
});

describe("the upstream's record of a generation that cannot be true: the reconciler charges the reservation", () => {
  for (const [why, record] of [
    ["a total_cost of 1e300", `{"id":"gen-1","total_cost":1e300,"tokens_prompt":9,"tokens_completion":3}`],
    ["a negative total_cost", `{"id":"gen-1","total_cost":-0.5,"tokens_prompt":9,"tokens_completion":3}`],
    ["a fractional token count", `{"id":"gen-1","total_cost":0.0000042,"tokens_prompt":9,"tokens_completion":0.5}`],
    ["an absurd total_cost", `{"id":"gen-1","total_cost":50,"tokens_prompt":9,"tokens_completion":3}`],
  ] as const) {
    test(why, async () => {
      // An answer without usage: what it cost is read from the record.
      const { t } = await appReporting(null, record);
      const res = await t.chat(ask());
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      await expectChargedAtReservation(t, await rowOf(t, res));
      expect(t.app.decorator.reconciler.stats).toMatchObject({ fromRecords: 0, atReservation: 1 });
    });
  }

  test("a record that can be true is charged as it says", async () => {
    const { t } = await appReporting(null);
    const res = await t.chat(ask());
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect(await rowOf(t, res)).toMatchObject({ status: "ok", source: "generation", costNano: 4200 });
    expect(await invalidCount(t)).toBe(0);
  });
});

describe("usage that can be true keeps today's charge", () => {
  for (const stream of [false, true]) {
    test(`${stream ? "stream" : "JSON"}: an overrun of 50 times the reservation (a price that rose) is charged as billed and freezes the account`, async () => {
      const { t, state } = await appReporting(GOOD_USAGE);
      const first = await t.chat(ask(stream));
      await first.text();
      const reserved = (await rowOf(t, first)).reservedNano!;
      state.usage = `{"prompt_tokens":9,"completion_tokens":3,"cost":${(50 * reserved) / 1e9}}`;
      const over = await t.chat(ask(stream));
      expect(over.status).toBe(200);
      await over.text();
      await t.app.decorator.chat.idle(10_000);
      const row = await rowOf(t, over);
      expect(row).toMatchObject({ status: "ok", source: "upstream", costNano: 50 * reserved, overrunNano: 49 * reserved });
      expect((await t.chat(ask(stream))).status).toBe(402);
      expect(await invalidCount(t)).toBe(0);
    });
  }
});
