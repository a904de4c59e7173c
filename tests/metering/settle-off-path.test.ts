/**
 * A stream's answer does not wait for its settle (with Redis or PostgreSQL a round trip): its
 * last bytes go to the client as they come, and the settle follows. The settle is held here
 * by a gate, and the whole stream still arrives. What waits instead: a status or usage read
 * by the app (read-your-writes), and the shutdown's drain. A JSON answer is the other way
 * round: it leaves only once its settle is done and its row is on disk (ARCHITECTURE.md §3
 * "The hard cap"), so a crash right after cannot lose a call its client has.
 */
import { describe, expect, test } from "bun:test";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";

const ask = { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 5 };

/** A streamed call, read to its end: the client has the whole answer. */
async function streamedCall(t: ChatTestApp): Promise<Response> {
  const answer = await t.chat({ ...ask, stream: true });
  expect(answer.status).toBe(200);
  expect(await answer.clone().text()).toContain("data: [DONE]");
  return answer;
}

/** Holds every settle of `t`'s budget ledger until `open()`. */
function gateSettles(t: ChatTestApp): { open(): void; held(): number } {
  const ledger = t.deps.budget;
  const settle = ledger.settle.bind(ledger);
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let held = 0;
  ledger.settle = async (...args) => {
    held++;
    await gate;
    return settle(...args);
  };
  return { open: release, held: () => held };
}

/** Whether `promise` has settled after the work already queued has run (no clock involved). */
async function isSettled(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < 50; i++) await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

describe("a JSON answer waits for its settle and its row", () => {
  test("held, the answer is not sent; released, it arrives with its row already written", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const gate = gateSettles(t);
    const answer = t.chat(ask);
    expect(await isSettled(answer)).toBe(false);
    expect(gate.held()).toBe(1);
    gate.open();
    const requestId = (await answer).headers.get("x-request-id")!;
    expect(await t.deps.store.usageLedger.find(requestId)).not.toBeNull();
  });
});

describe("the settle of a stream is off its response path", () => {
  test("the whole stream arrives while its settle is held; a status read waits for it and then shows the spend", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const gate = gateSettles(t);
    await streamedCall(t);
    expect(gate.held()).toBe(1);

    const status = t.get("/api/v1/status?appUserId=alice");
    expect(await isSettled(status)).toBe(false);
    gate.open();
    const body = (await (await status).json()) as { usage: { monthlyUsd: number }; reservedUsd?: number };
    expect(body.usage.monthlyUsd).toBeGreaterThan(0);
  });

  test("a usage read waits for the settle, so the call's row is listed right after its answer", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const gate = gateSettles(t);
    const answer = await streamedCall(t);
    const requestId = answer.headers.get("x-request-id");
    const usage = t.get("/api/v1/usage?appUserId=alice");
    expect(await isSettled(usage)).toBe(false);
    gate.open();
    const rows = ((await (await usage).json()) as { data: Array<{ requestId: string }> }).data;
    expect(rows.map((row) => row.requestId)).toEqual([requestId!]);
  });

  test("the operator's usage export waits for the settle too, so the call is in it", async () => {
    const adminToken = "an-admin-token-of-at-least-32-characters";
    const t = await chatTestApp({ env: { ADMIN_TOKEN: adminToken } });
    await t.connect("alice", 5);
    const gate = gateSettles(t);
    const requestId = (await streamedCall(t)).headers.get("x-request-id");
    const exported = t.app.handle(
      new Request(`http://localhost/api/v1/admin/apps/${t.appId}/usage?from=2026-01-15&to=2026-01-15`, { headers: { authorization: `Bearer ${adminToken}` } }),
    );
    expect(await isSettled(exported)).toBe(false);
    gate.open();
    const lines = (await (await exported).text()).trimEnd().split("\n");
    expect(lines.map((line) => JSON.parse(line).requestId)).toEqual([requestId]);
  });

  test("the shutdown's drain waits for a held settle, then the row is written", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const gate = gateSettles(t);
    await streamedCall(t);
    const idle = t.app.decorator.chat.idle(60_000);
    expect(await isSettled(idle)).toBe(false);
    gate.open();
    await idle;
    await t.deps.usageWriter.flush();
    expect(t.db.query("SELECT count(*) AS n FROM usage_ledger").get()).toEqual({ n: 1 });
  });
});
