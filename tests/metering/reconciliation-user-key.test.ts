/**
 * A call the user paid with their own upstream key whose usage was not seen is reconciled
 * with that key (issue 34): the upstream shows a generation's record to the account that paid
 * it. The call journal keeps the payer; the reconciler reopens the user's key from the
 * connection. When no key is linked any more (the connection revoked), nothing can read the
 * record, so the call is charged its whole reservation at once, as when no record can say.
 * Through app.handle against the mock, with every upstream request's Authorization recorded.
 */
import { describe, expect, test } from "bun:test";
import { chatTestApp, UPSTREAM_KEY, type ChatTestApp } from "../helpers/chat-app";
import { usdToNanoCeil, usdToNanoFloor } from "../../src/money";
import type { FetchUpstream } from "../../src/upstream/client";
import { leaveAfterFirstChunk } from "../helpers/leave-stream";

const ask = (directive: string) => ({
  model: "openai/gpt-4o-mini",
  messages: [{ role: "user", content: `Hi. ${directive}` }],
  max_tokens: 60,
  stream: true,
});
const rowOf = async (t: ChatTestApp, res: Response) => (await t.deps.store.usageLedger.find(res.headers.get("x-request-id")!))!;

/** An app whose `alice` pays with a key of her own, the mock behind a recorder of each request's path and Authorization. */
async function payingApp(env: Record<string, string> = {}) {
  const seen: Array<{ path: string; authorization: string }> = [];
  const fetchUpstream: FetchUpstream = (url, init) => {
    const request = new Request(url, init);
    seen.push({ path: new URL(url).pathname.replace(/^\/api\/v1/, ""), authorization: request.headers.get("authorization") ?? "" });
    return t.mock.fetch(request);
  };
  const t = await chatTestApp({ fetchUpstream, env: { DISCONNECT_DRAIN_MS: "30", ...env } });
  const userKey = t.mock.keys.create({ limitUsd: 5 }).key;
  await t.deps.store.connections.approve(t.appId, "alice", usdToNanoFloor(5), t.clock.now(), { source: "user", upstreamKey: userKey });
  const lookups = () => seen.filter((s) => s.path === "/generation").map((s) => s.authorization);
  return { t, userKey, lookups };
}

describe("reconciling a call the user's own key paid", () => {
  test("a stream its client left is settled at the upstream's record, looked up with the user's key; the operator's key pays nothing", async () => {
    const { t, userKey, lookups } = await payingApp();
    const res = await t.chat(ask("[[mock tokens=30 pause_ms=20 no_cancel]]"));
    expect(res.status).toBe(200);
    expect((await t.deps.store.callJournal.find(res.headers.get("x-request-id")!))?.payer).toBe("user");
    await leaveAfterFirstChunk(res);
    await t.flush();
    const served = t.mock.served.at(-1)!;
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ status: "client_disconnected", source: "generation", generationId: served.id });
    expect(row.costNano).toBe(usdToNanoCeil(served.costUsd));
    expect(lookups().length).toBeGreaterThan(0);
    expect(new Set(lookups())).toEqual(new Set([`Bearer ${userKey}`]));
    expect(t.mock.keys.get(userKey)!.usage.total).toBe(served.costUsd);
    expect(t.mock.keys.get(UPSTREAM_KEY)?.usage.total ?? 0).toBe(0);
    expect(t.logs.join("\n")).not.toContain(userKey);
  });

  test("a call left open by a process that died (its entry orphaned) is settled the same way, with the user's key", async () => {
    const { t, userKey, lookups } = await payingApp();
    const res = await t.chat(ask("[[mock tokens=30 pause_ms=20 no_cancel]]"));
    const requestId = res.headers.get("x-request-id")!;
    await leaveAfterFirstChunk(res);
    await t.app.decorator.chat.idle(10_000);
    // As if its process had died with the call running: another owner, with no lease, and no reason yet.
    t.db.query("UPDATE call_journal SET owner = 'dead-instance', reconcile_reason = NULL, next_attempt_at = NULL WHERE request_id = ?").run(requestId);
    await t.flush();
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ status: "instance_died", source: "generation", costNano: usdToNanoCeil(t.mock.served.at(-1)!.costUsd) });
    expect(new Set(lookups())).toEqual(new Set([`Bearer ${userKey}`]));
  });

  test("when the user's key is gone (the connection revoked) the call is charged its reservation at once, and nothing is looked up", async () => {
    const { t, lookups } = await payingApp();
    const res = await t.chat(ask("[[mock tokens=30 pause_ms=20 no_cancel]]"));
    const reserved = Number(res.headers.get("x-metering-reserved-usd"));
    await leaveAfterFirstChunk(res);
    await t.app.decorator.chat.idle(10_000);
    await t.deps.store.connections.revoke(t.appId, "alice", t.clock.now());
    await t.flush();
    const row = await rowOf(t, res);
    expect(row).toMatchObject({ status: "client_disconnected", source: "reservation", costNano: usdToNanoCeil(reserved) });
    // Never below what the upstream billed the user's key.
    expect(row.costNano).toBeGreaterThanOrEqual(usdToNanoCeil(t.mock.served.at(-1)!.costUsd));
    expect(lookups()).toEqual([]);
    expect(await t.deps.store.callJournal.counts()).toEqual({ running: 0, reconciling: 0 });
  });
});
