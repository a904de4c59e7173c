/**
 * A JSON answer does not wait for its settle (with Redis or PostgreSQL a round trip; issue
 * 14): the settle is held here by a gate, and the answer still arrives. What waits instead:
 * a status or usage read by the app (read-your-writes), and the shutdown's drain.
 */
import { describe, expect, test } from "bun:test";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";

const ask = { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 5 };

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

describe("the settle of a JSON answer is off its response path", () => {
  test("the answer arrives while its settle is held; a status read waits for it and then shows the spend", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const gate = gateSettles(t);
    const answer = await t.chat(ask);
    expect(answer.status).toBe(200);
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
    const answer = await t.chat(ask);
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
    const requestId = (await t.chat(ask)).headers.get("x-request-id");
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
    expect((await t.chat(ask)).status).toBe(200);
    const idle = t.app.decorator.chat.idle(60_000);
    expect(await isSettled(idle)).toBe(false);
    gate.open();
    await idle;
    await t.deps.usageWriter.flush();
    expect(t.db.query("SELECT count(*) AS n FROM usage_ledger").get()).toEqual({ n: 1 });
  });
});
