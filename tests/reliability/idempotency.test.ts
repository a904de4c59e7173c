/**
 * Idempotency-Key on chat calls, through app.handle with the project's mock (or a
 * hand-driven upstream) and a manual clock: a retry with the same key is answered with
 * the first call's bytes and never charged twice; everything that charged nothing final
 * frees the key. The real-client, real-network version is tests/e2e/idempotent-retry.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { openSqliteStore } from "../../src/store/sqlite";
import { chatTestApp, handDrivenUpstream, type ChatTestApp } from "../helpers/chat-app";
import { tempDatabase } from "../helpers/server";
import { approveConsentOrThrow } from "../helpers/grants";
import { createAppWithKey } from "../../src/services/operator/secret-keys";

const MODEL = "openai/gpt-4o-mini";
const ask = (text = "hi", extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: "user", content: text }], max_tokens: 20, ...extra });
const keyed = (key: string, extra: Record<string, string> = {}) => ({ "idempotency-key": key, ...extra });

const json = async (r: Response): Promise<any> => r.json();

/** Ledger rows and charged nano-dollars, after every stream settled and the writer flushed. */
async function ledger(t: ChatTestApp) {
  await t.app.decorator.chat.idle(10_000);
  await t.flush();
  return t.db.query<{ rows: number; spent: number | null }, []>("SELECT count(*) AS rows, sum(cost_nano) AS spent FROM usage_ledger").get()!;
}

describe("a retry with the same Idempotency-Key", () => {
  test("of a JSON call replays the same bytes, marked as a replay, with one upstream call and one charge", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const first = await t.chat(ask(), keyed("k-json"));
    const firstBytes = await first.text();
    const retry = await t.chat(ask(), keyed("k-json"));
    expect(retry.status).toBe(200);
    expect(await retry.text()).toBe(firstBytes);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(retry.headers.get("x-generation-id")).toBe(first.headers.get("x-generation-id"));
    expect(retry.headers.get("x-request-id")).not.toBe(first.headers.get("x-request-id"));
    expect(t.mock.served).toHaveLength(1);
    const { rows, spent } = await ledger(t);
    expect(rows).toBe(1);
    expect(spent).toBe((await t.deps.store.usageLedger.find(first.headers.get("x-request-id")!))!.costNano);
  });

  test("of a streamed call replays the whole event stream", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const first = await t.chat(ask("hi [[mock tokens=5]]", { stream: true }), keyed("k-sse"));
    const firstText = await first.text();
    expect(firstText).toContain("data: [DONE]");
    const retry = await t.chat(ask("hi [[mock tokens=5]]", { stream: true }), keyed("k-sse"));
    expect(retry.headers.get("content-type")).toBe("text/event-stream");
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(await retry.text()).toBe(firstText);
    expect(t.mock.served).toHaveLength(1);
    expect((await ledger(t)).rows).toBe(1);
  });

  test("while the first call still runs is 409 idempotency_conflict with Retry-After, then a replay once it ends", async () => {
    const upstream = handDrivenUpstream();
    const t = await chatTestApp({ fetchUpstream: upstream.fetchUpstream });
    await t.connect("alice", 5);
    const first = await t.chat(ask("hi", { stream: true }), keyed("k-running"));
    const reader = first.body!.getReader();
    upstream.send(`data: ${JSON.stringify(chunk({ content: "Hel" }))}\n\n`);
    await reader.read();

    const early = await t.chat(ask("hi", { stream: true }), keyed("k-running"));
    expect(early.status).toBe(409);
    expect(early.headers.get("retry-after")).toBe("1");
    expect((await json(early)).error.code).toBe("idempotency_conflict");

    upstream.send(`data: ${JSON.stringify(chunk({}, { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4, cost: 0.000002 }))}\n\ndata: [DONE]\n\n`);
    upstream.end();
    while (!(await reader.read()).done);
    await t.app.decorator.chat.idle(10_000);
    const late = await t.chat(ask("hi", { stream: true }), keyed("k-running"));
    expect(late.status).toBe(200);
    expect(await late.text()).toContain('"content":"Hel"');
    expect(upstream.requests).toHaveLength(1);
    expect(await ledger(t)).toEqual({ rows: 1, spent: 2000 });
  });

  test("after the client dropped mid-stream replays the answer the proxy drained to its end", async () => {
    const upstream = handDrivenUpstream();
    const t = await chatTestApp({ fetchUpstream: upstream.fetchUpstream });
    await t.connect("alice", 5);
    const first = await t.chat(ask("hi", { stream: true }), keyed("k-dropped"));
    const reader = first.body!.getReader();
    upstream.send(`data: ${JSON.stringify(chunk({ content: "partial" }))}\n\n`);
    await reader.read();
    await reader.cancel();
    upstream.send(`data: ${JSON.stringify(chunk({ content: " rest" }))}\n\n`);
    upstream.send(`data: ${JSON.stringify(chunk({}, { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, cost: 0.000003 }))}\n\ndata: [DONE]\n\n`);
    upstream.end();
    await t.app.decorator.chat.idle(10_000);

    const retry = await t.chat(ask("hi", { stream: true }), keyed("k-dropped"));
    const text = await retry.text();
    expect(text).toContain('"content":"partial"');
    expect(text).toContain('"content":" rest"');
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(await ledger(t)).toEqual({ rows: 1, spent: 3000 });
  });

  test("is replayed even when the first call used up the grant that paid for it", async () => {
    const t = await chatTestApp();
    const consent = await t.deps.store.grants.createConsentRequest(
      { appId: t.appId, usdCapNano: 1_000_000_000, maxUses: 1, ttlSeconds: 3600, origin: "http://localhost:3000", state: "s" },
      t.clock.now(),
      600_000,
    );
    const { grantToken } = await approveConsentOrThrow(t.deps.store.grants, consent, t.clock.now());
    const withGrant = keyed("k-grant", { "x-service-user": "", "x-service-grant": grantToken });
    const first = await t.chat(ask(), withGrant);
    expect(first.status).toBe(200);
    const other = await t.chat(ask(), { "x-service-user": "", "x-service-grant": grantToken });
    expect((await json(other)).error.code).toBe("grant_invalid");
    const retry = await t.chat(ask(), withGrant);
    expect(retry.status).toBe(200);
    expect(await retry.text()).toBe(await first.text());
  });
});

describe("what an Idempotency-Key does not allow", () => {
  test("the same key with another body, or for another user, is 422 idempotency_mismatch and reaches no upstream", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    await t.connect("bob", 5);
    expect((await t.chat(ask("one"), keyed("k-mismatch"))).status).toBe(200);
    for (const res of [await t.chat(ask("two"), keyed("k-mismatch")), await t.chat(ask("one"), keyed("k-mismatch", { "x-service-user": "bob" }))]) {
      expect(res.status).toBe(422);
      expect((await json(res)).error.code).toBe("idempotency_mismatch");
    }
    expect(t.mock.served).toHaveLength(1);
  });

  test("keys are per app: another app's call with the same key runs and is charged to that app", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    const { app: other, key } = await createAppWithKey(t.deps.store.apps, "other", [], t.clock.now());
    await t.deps.store.connections.approve(other.id, "alice", 5_000_000_000, t.clock.now());
    expect((await t.chat(ask(), keyed("shared-key"))).status).toBe(200);
    const res = await t.chat(ask(), keyed("shared-key", { authorization: `Bearer ${key.secretKey}` }));
    expect(res.status).toBe(200);
    expect(res.headers.get("idempotent-replayed")).toBeNull();
    expect(t.mock.served).toHaveLength(2);
  });

  test("a malformed key is 400 invalid_request; a quoted key (RFC 8941 sf-string) is the same key unquoted", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 5);
    for (const bad of ["x".repeat(256), "has space", "tab\there"]) {
      const res = await t.chat(ask(), keyed(bad));
      expect(res.status).toBe(400);
      expect((await json(res)).error.code).toBe("invalid_request");
    }
    expect((await t.chat(ask(), keyed("k-quoted"))).status).toBe(200);
    const quoted = await t.chat(ask(), keyed('"k-quoted"'));
    expect(quoted.headers.get("idempotent-replayed")).toBe("true");
    expect(t.mock.served).toHaveLength(1);
  });
});

describe("when the key is freed and a retry runs again", () => {
  test("after an upstream failure nothing was charged: the retry goes upstream and is charged once", async () => {
    let calls = 0;
    const t: ChatTestApp = await chatTestApp({
      // The first attempt meets an upstream 500; the retry reaches the mock.
      fetchUpstream: (url, init) => (++calls === 1 ? Promise.resolve(new Response("{}", { status: 500 })) : t.mock.fetch(new Request(url, init))),
    });
    await t.connect("alice", 5);
    expect((await t.chat(ask(), keyed("k-fail"))).status).toBe(502);
    const retry = await t.chat(ask(), keyed("k-fail"));
    expect(retry.status).toBe(200);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    const { rows, spent } = await ledger(t);
    expect(rows).toBe(2);
    expect(spent).toBe((await t.deps.store.usageLedger.find(retry.headers.get("x-request-id")!))!.costNano);
  });

  test("after a 402 the key is free: once the user raised the cap, the retry runs", async () => {
    const t = await chatTestApp();
    await t.connect("alice", 0.000001);
    expect((await t.chat(ask(), keyed("k-402"))).status).toBe(402);
    await t.connect("alice", 5);
    const retry = await t.chat(ask(), keyed("k-402"));
    expect(retry.status).toBe(200);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
  });

  test("a running claim nobody renews (its process died) is taken over once its 60 s lease lapses", async () => {
    const upstream = handDrivenUpstream();
    const t = await chatTestApp({ fetchUpstream: upstream.fetchUpstream });
    await t.connect("alice", 5);
    // The first call stays open; on the manual clock its lease is never renewed, as after a SIGKILL.
    const first = await t.chat(ask("hi", { stream: true }), keyed("k-dead"));
    expect(first.status).toBe(200);
    t.clock.advance(59_000);
    expect((await t.chat(ask("hi", { stream: true }), keyed("k-dead"))).status).toBe(409);
    t.clock.advance(2_000);
    const takeover = await t.chat(ask("hi", { stream: true }), keyed("k-dead"));
    expect(takeover.status).toBe(200);
    expect(takeover.headers.get("idempotent-replayed")).toBeNull();
    expect(upstream.requests).toHaveLength(2);
  });

  test("a key is kept for IDEMPOTENCY_TTL_SECONDS; after that the same key runs (and charges) again", async () => {
    const t = await chatTestApp({ env: { IDEMPOTENCY_TTL_SECONDS: "3600" } });
    await t.connect("alice", 5);
    await t.chat(ask(), keyed("k-ttl"));
    t.clock.advance(3_599_000);
    expect((await t.chat(ask(), keyed("k-ttl"))).headers.get("idempotent-replayed")).toBe("true");
    t.clock.advance(2_000);
    const again = await t.chat(ask(), keyed("k-ttl"));
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBeNull();
    expect((await ledger(t)).rows).toBe(2);
  });

  test("an answer over IDEMPOTENCY_MAX_ANSWER_BYTES is not kept: the retry gets 409 with x-should-retry: false and no second charge", async () => {
    const t = await chatTestApp({ env: { IDEMPOTENCY_MAX_ANSWER_BYTES: "0" } });
    await t.connect("alice", 5);
    expect((await t.chat(ask(), keyed("k-big"))).status).toBe(200);
    const retry = await t.chat(ask(), keyed("k-big"));
    expect(retry.status).toBe(409);
    expect(retry.headers.get("x-should-retry")).toBe("false");
    expect(t.mock.served).toHaveLength(1);
  });
});

function chunk(delta: Record<string, unknown>, usage?: Record<string, number>) {
  return {
    id: "gen-hand",
    object: "chat.completion.chunk",
    created: 1,
    model: MODEL,
    choices: usage ? [] : [{ index: 0, delta, finish_reason: null }],
    ...(usage ? { usage } : {}),
  };
}

describe("two processes on one SQLite file", () => {
  test("a key claimed through one connection is seen as running, then done, through another", async () => {
    const db = tempDatabase();
    mkdirSync(dirname(db.path), { recursive: true });
    const [a, b] = [openSqliteStore(db.path), openSqliteStore(db.path)];
    try {
      const fingerprint = new Uint8Array(32).fill(7);
      expect(await a.idempotencyKeys.claim("app1", "k", fingerprint, "req-a", 1_000, 60_000, 86_400_000)).toEqual({ kind: "claimed" });
      expect(await b.idempotencyKeys.claim("app1", "k", fingerprint, "req-b", 1_001, 60_000, 86_400_000)).toEqual({ kind: "running", requestId: "req-a" });
      await a.idempotencyKeys.complete(
        "app1",
        "k",
        "req-a",
        { status: 200, contentType: "application/json", generationId: "gen-1", body: new TextEncoder().encode("{}") },
        86_401_000,
      );
      const seen = await b.idempotencyKeys.claim("app1", "k", fingerprint, "req-b", 1_002, 60_000, 86_400_000);
      expect(seen).toMatchObject({ kind: "done", requestId: "req-a", answer: { generationId: "gen-1" } });
    } finally {
      await a.close();
      await b.close();
      db.cleanup();
    }
  });
});
