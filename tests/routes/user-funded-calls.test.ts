/**
 * A connection the user pays for with their own upstream key (issue 34): its calls go upstream
 * with that key (JSON and SSE), the operator's key pays nothing for them, the hard cap holds
 * as on the operator's key, a refusal of the key is 402 funding_invalid (the connection
 * marked, funding.invalid recorded, the next call refused without reaching the upstream) until
 * the user links a key again, and /status shows the upstream's own credit on the key. The
 * key is linked through the store, as the PKCE callback does, with a key the mock issued.
 */
import { describe, expect, test } from "bun:test";
import { chatTestApp, UPSTREAM_KEY, type ChatTestApp } from "../helpers/chat-app";
import { OperatorService } from "../../src/services/operator";
import { usdToNanoCeil, usdToNanoFloor } from "../../src/money";
import { UPSTREAM_CREDIT_TTL_MS } from "../../src/services/upstream-credit";
import type { FetchUpstream } from "../../src/upstream/client";
import { SecretBox, sealedContext } from "../../src/secrets/secret-box";

const MODEL = "openai/gpt-4o-mini";
const json = async (r: Response): Promise<any> => r.json();
const ask = (text: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: "user", content: text }], max_tokens: 40, ...extra });

/** An app with a webhook endpoint (so funding.invalid is recorded), `alice` paying with a key of her own, `bob` on the operator's. */
async function payingApp(userLimitUsd: number | null = 5, capUsd = 5, options: Parameters<typeof chatTestApp>[0] = {}) {
  const t = await chatTestApp(options);
  await new OperatorService(t.deps.store, t.clock).webhooks.add(t.appId, { url: "https://hooks.example/metered-proxy" });
  const userKey = t.mock.keys.create({ limitUsd: userLimitUsd }).key;
  await linkKey(t, "alice", userKey, capUsd);
  await t.connect("bob", 5);
  return { t, userKey };
}

const linkKey = (t: ChatTestApp, user: string, upstreamKey: string, capUsd = 5) =>
  t.deps.store.connections.approve(t.appId, user, usdToNanoFloor(capUsd), t.clock.now(), { source: "user", upstreamKey });

/** What the mock billed a key in all (0 for a key that never called). */
const billedTo = (t: ChatTestApp, key: string) => t.mock.keys.get(key)?.usage.total ?? 0;
const ledgerNano = (t: ChatTestApp, user: string) =>
  t.db.query<{ n: number }, [string]>("SELECT COALESCE(SUM(cost_nano), 0) AS n FROM usage_ledger WHERE app_user_id = ?").get(user)!.n;
const eventTypes = (t: ChatTestApp) =>
  t.db
    .query<{ type: string }, []>("SELECT type FROM webhook_events")
    .all()
    .map((e) => e.type);

/** A 200 answer, read to its end (a stream is billed when it ends). */
async function answered(response: Promise<Response>): Promise<string> {
  const res = await response;
  const text = await res.text();
  expect({ status: res.status, text }).toMatchObject({ status: 200 });
  return text;
}

/** The Authorization each upstream request carried, by path, recorded in front of the mock. */
function recordingUpstream(mock: () => ChatTestApp["mock"]) {
  const seen: Array<{ path: string; authorization: string }> = [];
  const fetchUpstream: FetchUpstream = (url, init) => {
    const request = new Request(url, init);
    seen.push({ path: new URL(url).pathname.replace(/^\/api\/v1/, ""), authorization: request.headers.get("authorization") ?? "" });
    return mock().fetch(request);
  };
  return { seen, fetchUpstream };
}

describe("a call on a connection the user pays for", () => {
  test("JSON and SSE go upstream with the user's key; the user's key is billed, the operator's is not, and the ledger agrees", async () => {
    const upstream = recordingUpstream(() => t.mock);
    const { t, userKey } = await payingApp(5, 5, { fetchUpstream: upstream.fetchUpstream });
    // bob's call is the operator's: it moves the operator's key, as before.
    expect((await t.chat(ask("hi"), { "x-service-user": "bob" })).status).toBe(200);
    await t.flush();
    const operatorBefore = billedTo(t, UPSTREAM_KEY);
    expect(operatorBefore).toBeGreaterThan(0);

    const plain = await t.chat(ask("hello"));
    expect(plain.status).toBe(200);
    expect((await json(plain)).choices[0].message.content.length).toBeGreaterThan(0);
    const streamed = await t.chat(ask("hello", { stream: true }));
    expect(streamed.status).toBe(200);
    expect(await streamed.text()).toContain("data: [DONE]");
    await t.flush();

    const chats = upstream.seen.filter((s) => s.path === "/chat/completions");
    expect(chats.map((s) => s.authorization)).toEqual([`Bearer ${UPSTREAM_KEY}`, `Bearer ${userKey}`, `Bearer ${userKey}`]);
    expect(billedTo(t, UPSTREAM_KEY)).toBe(operatorBefore);
    const userBilled = billedTo(t, userKey);
    expect(userBilled).toBeGreaterThan(0);
    // The ledger holds alice to what her key was billed, call by call.
    expect(ledgerNano(t, "alice")).toBe(t.mock.served.slice(1).reduce((sum, s) => sum + usdToNanoCeil(s.costUsd), 0));
    const status = await json(await t.get("/api/v1/status?appUserId=alice"));
    expect(status).toMatchObject({ fundingSource: "user", connected: true });
    // remainingUsd stays the cap minus usage; the upstream's own credit is apart.
    expect(status.remainingUsd).toBeCloseTo(5 - status.usage.monthlyUsd, 9);
    expect(status.upstreamCredit).toEqual({ limitUsd: 5, remainingUsd: t.mock.keys.get(userKey)!.usage.remaining(5, null, t.clock.now()) });
    // The key is in no log line and no answer.
    expect(t.logs.join("\n")).not.toContain(userKey);
    expect(JSON.stringify(status)).not.toContain(userKey);
  });

  test("the cap holds on the user's key: max_tokens clamped to what is left, then 402 budget_exceeded before the upstream", async () => {
    // The user's key could pay far more than the cap: the cap is what stops the calls.
    const { t, userKey } = await payingApp(100, 0.0003);
    let refused: any = null;
    for (let i = 0; i < 40 && refused === null; i++) {
      const res = await t.chat(ask("[[mock tokens=40]]", { max_tokens: 400 }));
      if (res.status === 402) refused = await json(res);
      else expect(res.status).toBe(200);
    }
    expect(refused?.error.code).toBe("budget_exceeded");
    await t.flush();
    const served = t.mock.served.length;
    expect((await t.chat(ask("[[mock tokens=40]]", { max_tokens: 400 }))).status).toBe(402);
    expect(t.mock.served.length).toBe(served);
    // Some calls were clamped below the 400 asked for; spend never passed the cap; the ledger is what the key paid.
    expect(t.mock.served.some((s) => s.maxTokens !== null && s.maxTokens < 400)).toBe(true);
    expect(ledgerNano(t, "alice")).toBeLessThanOrEqual(usdToNanoFloor(0.0003));
    expect(ledgerNano(t, "alice")).toBe(usdToNanoCeil(billedTo(t, userKey)));
    expect(billedTo(t, UPSTREAM_KEY)).toBe(0);
  });
});

describe("a user's key this server cannot open", () => {
  test("re-sealed under a key it does not hold (a rotation it missed): 503 unavailable, nothing reserved or billed, the user's funding not marked", async () => {
    const { t, userKey } = await payingApp();
    const [stored] = (await t.deps.store.connections.storedUserKeys()).filter((k) => k.appUserId === "alice");
    const foreign = SecretBox.random().seal(userKey, sealedContext.connectionUserKey(t.appId, "alice"));
    expect(await t.deps.store.connections.replaceStoredUserKey(t.appId, "alice", stored!.stored, foreign)).toBe(true);
    for (const stream of [false, true]) {
      const res = await t.chat(ask("hi", { stream }));
      expect(res.status).toBe(503);
      const { error } = await json(res);
      expect(error.code).toBe("unavailable");
      expect(error.message).toContain("restarted with its new secrets key");
    }
    await t.flush();
    expect(billedTo(t, userKey)).toBe(0);
    expect(ledgerNano(t, "alice")).toBe(0);
    expect((await t.deps.store.connections.find(t.appId, "alice"))!.fundingStatus).toBe("ok");
    expect(eventTypes(t)).not.toContain("funding.invalid");
    expect(t.logs.filter((l) => l.includes("unhandled error"))).toEqual([]);
  });
});

describe("the upstream refuses the user's key", () => {
  for (const stream of [false, true]) {
    test(`out of credit (${stream ? "SSE" : "JSON"}): 402 funding_invalid, funding.invalid recorded, the next call refused at once; a new key restores`, async () => {
      const { t, userKey } = await payingApp(5);
      await answered(t.chat(ask("hi", { stream })));
      await t.flush();
      // The user's credit runs out upstream.
      t.mock.keys.get(userKey)!.limitUsd = t.mock.keys.get(userKey)!.usage.total;
      const served = t.mock.served.length;
      const refused = await t.chat(ask("hi", { stream }));
      expect(refused.status).toBe(402);
      const { error } = await json(refused);
      expect(error.code).toBe("funding_invalid");
      expect(error.message).not.toContain(userKey);
      expect((await t.deps.store.connections.find(t.appId, "alice"))!.fundingStatus).toBe("invalid");
      expect(eventTypes(t).filter((type) => type === "funding.invalid")).toHaveLength(1);
      // bob, on the operator's key, is not touched.
      expect((await t.deps.store.connections.find(t.appId, "bob"))!.fundingStatus).toBe("ok");

      // The next call is refused without reaching the upstream (the mock serves nothing more).
      const upstreamCalls = t.mock.served.length;
      expect((await json(await t.chat(ask("hi", { stream })))).error.code).toBe("funding_invalid");
      expect(t.mock.served.length).toBe(upstreamCalls);
      expect(upstreamCalls).toBe(served + 1);
      expect((await json(await t.get("/api/v1/status?appUserId=alice"))).upstreamCredit).toEqual({ limitUsd: expect.any(Number), remainingUsd: 0 });

      // Reconnecting (the PKCE flow's end: a new key linked) restores it, on the new key.
      const newKey = t.mock.keys.create({ limitUsd: 5 }).key;
      await linkKey(t, "alice", newKey);
      expect((await t.deps.store.connections.find(t.appId, "alice"))!.fundingStatus).toBe("ok");
      await answered(t.chat(ask("hi", { stream })));
      await t.flush();
      expect(billedTo(t, newKey)).toBeGreaterThan(0);
      expect(billedTo(t, UPSTREAM_KEY)).toBe(0);
      expect(t.logs.join("\n")).not.toContain(userKey);
      expect(t.logs.join("\n")).not.toContain(newKey);
    });
  }

  for (const stream of [false, true]) {
    test(`credit left, but less than the call's max_tokens could cost (${stream ? "SSE" : "JSON"}): 402 budget_exceeded with the budget's figures, nothing marked`, async () => {
      // $0.001 left on the key, a $5 cap here: 4,000 completion tokens of gpt-4o-mini ($0.0024) pass the cap, not the key.
      const { t, userKey } = await payingApp(0.001, 5);
      const refused = await t.chat(ask("hi", { stream, max_tokens: 4000 }));
      expect(refused.status).toBe(402);
      const { error } = await json(refused);
      expect(error).toMatchObject({ code: "budget_exceeded", limitUsd: 5, usedUsd: 0, remainingUsd: 5, resetsAt: "2026-02-01T00:00:00.000Z" });
      // The upstream's own words say why, and the message says what to do.
      expect(error.message).toContain("can only afford");
      expect(error.message).toContain("Send a smaller max_tokens");
      expect(error.message).not.toContain(userKey);
      // The key is fine: the connection is not marked, no funding.invalid, nothing charged.
      expect((await t.deps.store.connections.find(t.appId, "alice"))!.fundingStatus).toBe("ok");
      expect(eventTypes(t)).not.toContain("funding.invalid");
      await t.flush();
      expect(ledgerNano(t, "alice")).toBe(0);
      // A call the key can pay goes through on the same connection.
      await answered(t.chat(ask("hi", { stream, max_tokens: 40 })));
      await t.flush();
      expect(billedTo(t, userKey)).toBeGreaterThan(0);
    });
  }

  test('credit left that affords not even one token of the call ("can only afford 0"): the key\'s credit is short, 402 funding_invalid', async () => {
    const { t } = await payingApp(0.000000001, 5);
    const refused = await t.chat(ask("hi", { max_tokens: 40 }));
    expect(refused.status).toBe(402);
    const { error } = await json(refused);
    expect(error.code).toBe("funding_invalid");
    expect(error.message).toContain("can only afford 0");
    expect((await t.deps.store.connections.find(t.appId, "alice"))!.fundingStatus).toBe("invalid");
  });

  test("a key its owner deleted (401) is the same 402 funding_invalid, and the refused call costs nothing", async () => {
    const { t, userKey } = await payingApp(5);
    t.mock.keys.get(userKey)!.deleted = true;
    const res = await t.chat(ask("hi"));
    expect(res.status).toBe(402);
    expect((await json(res)).error.message).toStartWith("the upstream refused the user's own key (HTTP 401");
    await t.flush();
    expect(ledgerNano(t, "alice")).toBe(0);
    expect(eventTypes(t)).toContain("funding.invalid");
    expect(billedTo(t, UPSTREAM_KEY)).toBe(0);
  });

  test("a connection whose key was unlinked since it was read is refused before anything is reserved or sent", async () => {
    const { t } = await payingApp(5);
    const target = await (await import("../../src/services/budget-target")).userBudgetTarget(t.deps.store.connections, t.clock, t.appId, "alice");
    await t.deps.store.connections.revoke(t.appId, "alice", t.clock.now());
    const body = ask("hi");
    const error = await t.app.decorator.chat
      .complete({ requestId: "req_unlinked", target, body, bodyBytes: JSON.stringify(body).length, clientHeaders: new Headers() })
      .then(
        () => null,
        (err: { code?: string }) => err,
      );
    expect(error?.code).toBe("funding_invalid");
    expect(t.mock.served).toHaveLength(0);
    expect(await t.deps.budget.snapshot(target.account)).toEqual({ spentNano: 0, reservedNano: 0 });
  });
});

describe("a user's key that does not open (SealedSecretError)", () => {
  /** Alice's sealed key replaced: sealed under a secrets key this process lacks, or with one byte of its ciphertext changed. */
  const breakKey = (t: ChatTestApp, how: "unknown_key" | "tampered") => {
    const row = t.db.query<{ sealed: string }, []>("SELECT user_key_sealed AS sealed FROM connections WHERE app_user_id = 'alice'").get()!;
    const sealed =
      how === "unknown_key"
        ? SecretBox.random().seal("sk-or-v1-elsewhere", sealedContext.connectionUserKey(t.appId, "alice"))
        : row.sealed.slice(0, -2) + (row.sealed.endsWith("AA") ? "BB" : "AA");
    t.db.query("UPDATE connections SET user_key_sealed = ? WHERE app_user_id = 'alice'").run(sealed);
  };
  const errorLines = (t: ChatTestApp) => t.logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.level === "error");

  for (const how of ["unknown_key", "tampered"] as const) {
    // A key this server lacks (the store re-sealed by a rotation it missed) is no fault of the
    // call's: chat answers 503, to be retried on an instance that has it (tests/e2e/rotate-kek-live.test.ts).
    const chatStatus = how === "unknown_key" ? 503 : 500;
    test(`${how}: chat (JSON, SSE, with an Idempotency-Key) answers ${chatStatus}, /status and /connections the envelope's 500, each logged once with its request id and reason`, async () => {
      const { t, userKey } = await payingApp(5);
      breakKey(t, how);
      const session = await json(
        await t.app.handle(
          new Request("http://localhost/api/v1/sessions", {
            method: "POST",
            headers: { authorization: `Bearer ${t.secretKey}`, "content-type": "application/json" },
            body: JSON.stringify({ appUserId: "alice" }),
          }),
        ),
      );
      const answers = [
        await t.chat(ask("hi")),
        await t.chat(ask("hi", { stream: true })),
        await t.chat(ask("hi"), { "idempotency-key": "key-1" }),
        await t.get("/api/v1/status?appUserId=alice"),
        await t.app.handle(new Request("http://localhost/api/v1/connections", { headers: { authorization: `Bearer ${session.token}` } })),
      ];
      const internal = answers.filter((answer, i) => i >= 3 || chatStatus === 500);
      for (const answer of answers.slice(0, 3)) expect(answer.status).toBe(chatStatus);
      for (const answer of internal) {
        expect({ status: answer.status, body: await answer.text() }).toEqual({ status: 500, body: '{"error":{"code":"internal","message":"internal error"}}' });
      }
      const lines = errorLines(t).filter((line) => line.msg === "a sealed secret could not be opened");
      expect(lines.map((line) => line.requestId)).toEqual(internal.map((answer) => answer.headers.get("x-request-id")));
      for (const line of lines) {
        expect(line).toMatchObject({ msg: "a sealed secret could not be opened", reason: how, secret: `connection_user_key/${t.appId}/alice` });
        expect(line.error).toBeUndefined();
      }
      // Nothing went upstream, nothing was reserved or charged; the key is in no line; the connection is as it was.
      expect(t.mock.served).toHaveLength(0);
      await t.flush();
      expect(ledgerNano(t, "alice")).toBe(0);
      expect(t.logs.join("\n")).not.toContain(userKey);
      expect((await t.deps.store.connections.find(t.appId, "alice"))!.fundingStatus).toBe("ok");
    });
  }
});

describe("the upstream's own credit in /status and /connections", () => {
  test("read with the user's key and kept 30 s; null for the operator's users and when the upstream does not answer", async () => {
    const upstream = recordingUpstream(() => t.mock);
    const { t, userKey } = await payingApp(2, 5, { fetchUpstream: upstream.fetchUpstream });
    const made = { userKey };
    const keyReads = () => upstream.seen.filter((s) => s.path === "/key");
    expect((await json(await t.get("/api/v1/status?appUserId=alice"))).upstreamCredit).toEqual({ limitUsd: 2, remainingUsd: 2 });
    expect(keyReads()).toEqual([{ path: "/key", authorization: `Bearer ${made.userKey}` }]);
    expect((await t.chat(ask("hi"))).status).toBe(200);
    await t.flush();
    // Within the 30 s, the same answer without asking again; after them, read afresh.
    expect((await json(await t.get("/api/v1/status?appUserId=alice"))).upstreamCredit).toEqual({ limitUsd: 2, remainingUsd: 2 });
    expect(keyReads()).toHaveLength(1);
    t.clock.advance(UPSTREAM_CREDIT_TTL_MS);
    const fresh = (await json(await t.get("/api/v1/status?appUserId=alice"))).upstreamCredit;
    expect(fresh.remainingUsd).toBeCloseTo(2 - billedTo(t, made.userKey), 9);
    expect(fresh.remainingUsd).toBeLessThan(2);
    expect(keyReads()).toHaveLength(2);

    // The operator's users: null, and the upstream is not asked.
    expect((await json(await t.get("/api/v1/status?appUserId=bob"))).upstreamCredit).toBeNull();
    expect(keyReads()).toHaveLength(2);
    // A key the upstream refuses: null, not an error.
    t.mock.keys.get(made.userKey)!.disabled = true;
    t.clock.advance(UPSTREAM_CREDIT_TTL_MS);
    const status = await t.get("/api/v1/status?appUserId=alice");
    expect(status.status).toBe(200);
    expect((await json(status)).upstreamCredit).toBeNull();
  });

  test("a key without a limit shows nulls inside, and a relinked key is read afresh, in /connections too", async () => {
    const { t } = await payingApp(null);
    expect((await json(await t.get("/api/v1/status?appUserId=alice"))).upstreamCredit).toEqual({ limitUsd: null, remainingUsd: null });
    await linkKey(t, "alice", t.mock.keys.create({ limitUsd: 3 }).key);
    expect((await json(await t.get("/api/v1/status?appUserId=alice"))).upstreamCredit).toEqual({ limitUsd: 3, remainingUsd: 3 });
    // The user's own browser code reads the same field, with a session token.
    const session = await t.app.handle(
      new Request("http://localhost/api/v1/sessions", {
        method: "POST",
        headers: { authorization: `Bearer ${t.secretKey}`, "content-type": "application/json" },
        body: JSON.stringify({ appUserId: "alice" }),
      }),
    );
    const { token } = await json(session);
    const connection = await t.app.handle(new Request("http://localhost/api/v1/connections", { headers: { authorization: `Bearer ${token}` } }));
    expect(await json(connection)).toMatchObject({ appUserId: "alice", fundingSource: "user", upstreamCredit: { limitUsd: 3, remainingUsd: 3 } });
  });
});
