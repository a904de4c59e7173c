/**
 * The upstream refusing the operator's key (UPSTREAM_API_KEY: 401, 402, or 403 "Key limit
 * exceeded") is the operator's problem (issue 34): the call answers 502 `upstream` naming
 * the key, no user is marked and no funding.invalid is recorded, the refused call costs
 * nothing, and /healthz, /readyz and /metrics report it until a call on the key succeeds.
 */
import { describe, expect, test } from "bun:test";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";
import { expectOk } from "../helpers/expect";
import { OperatorService } from "../../src/services/operator";
import { userAccount } from "../../src/budget/accounts";
import { periodAt } from "../../src/money";
import { approveConsentOrThrow } from "../helpers/grants";
import { userBudgetTarget } from "../../src/services/budget-target";
import { ApiError } from "../../src/errors";

const METRICS_TOKEN = "metrics-token-0123456789";
const MODEL = "openai/gpt-4o-mini";
const json = async (r: Response): Promise<any> => r.json();
const ask = (text: string, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: "user", content: text }], ...extra });

/** An app whose users and webhook endpoint are set up, so that a funding.invalid would be recorded if one were due. */
async function operatorApp(options: Parameters<typeof chatTestApp>[0] = {}): Promise<ChatTestApp> {
  const t = await chatTestApp({ ...options, env: { METRICS_TOKEN, ...options.env } });
  await new OperatorService(t.deps.store, t.clock).webhooks.add(t.appId, { url: "https://hooks.example/metered-proxy" });
  await t.connect("alice", 5);
  await t.connect("bob", 5);
  return t;
}

const eventTypes = (t: ChatTestApp) =>
  t.db
    .query<{ type: string }, []>("SELECT type FROM webhook_events")
    .all()
    .map((e) => e.type);
const readyz = async (t: ChatTestApp) => t.app.handle(new Request("http://localhost/readyz"));
const healthz = async (t: ChatTestApp) => t.app.handle(new Request("http://localhost/healthz"));

/** `proxy_upstream_key_refusals_total` by status label, as /metrics renders it. */
async function keyRefusals(t: ChatTestApp): Promise<Record<string, number>> {
  const res = await t.app.handle(new Request("http://localhost/metrics", { headers: { authorization: `Bearer ${METRICS_TOKEN}` } }));
  expect(res.status).toBe(200);
  const counts: Record<string, number> = {};
  for (const [, status, value] of (await res.text()).matchAll(/^proxy_upstream_key_refusals_total\{status="(\d+)"\} (\S+)$/gm)) counts[status!] = Number(value);
  return counts;
}

describe("the upstream refuses the operator's key", () => {
  for (const [status, upstreamMessage] of [
    [401, "Missing Authentication header"],
    [402, "Insufficient credits"],
    [403, "Key limit exceeded"],
  ] as const) {
    test(`HTTP ${status}: 502 upstream naming the operator's key, no user marked, nothing charged, reported until a call succeeds`, async () => {
      const t = await operatorApp();
      for (const [user, stream] of [
        ["alice", false],
        ["bob", true],
      ] as const) {
        const res = await t.chat(ask(`hi [[mock status=${status}]]`, { stream }), { "x-service-user": user });
        expect(res.status).toBe(502);
        // Refused again until the operator acts: a retry would only be refused again.
        expect(res.headers.get("x-should-retry")).toBe("false");
        const { error } = await json(res);
        expect(error.code).toBe("upstream");
        expect(error.message).toStartWith(`the service's upstream key was refused (HTTP ${status}: ${upstreamMessage}`);
        expect(error.message).toContain("the operator must fix its credit or key");
      }
      await t.flush();

      // No user is marked, none is refused at once, and no funding.invalid is recorded.
      for (const user of ["alice", "bob"]) expect((await t.deps.store.connections.find(t.appId, user))!.fundingStatus).toBe("ok");
      expect(eventTypes(t)).not.toContain("funding.invalid");
      // The next call goes upstream (it is not refused at once as a marked user's would be).
      const served = t.mock.served.length;
      expect((await json(await t.chat(ask(`hi [[mock status=${status}]]`)))).error.code).toBe("upstream");
      expect(t.mock.served.length).toBe(served + 1);

      // The upstream billed nothing, and the ledger and the cap say the same: each refused
      // call's row costs 0, and no reservation is left held.
      await t.flush();
      expect(t.mock.served.every((s) => s.status === status && s.costUsd === 0)).toBe(true);
      const rows = t.db.query<{ status: string; cost_nano: number }, []>("SELECT status, cost_nano FROM usage_ledger").all();
      expect(rows).toEqual(Array.from({ length: 3 }, () => ({ status: `upstream_${status}`, cost_nano: 0 })));
      const period = periodAt(t.clock.now());
      for (const user of ["alice", "bob"]) {
        expect(await t.deps.budget.snapshot(userAccount(t.appId, period.id, user))).toEqual({ spentNano: 0, reservedNano: 0 });
        expect(await json(await t.get(`/api/v1/status?appUserId=${user}`))).toMatchObject({ remainingUsd: 5, usage: { monthlyUsd: 0 } });
      }

      // The operator is told: health degraded, a warning on /readyz (still ready), and a count.
      const ready = await expectOk(await readyz(t));
      expect(ready).toMatchObject({ ready: true, problems: [] });
      expect(ready.warnings).toHaveLength(1);
      expect(ready.warnings[0]).toStartWith(`the upstream refused the service's own key (UPSTREAM_API_KEY) with HTTP ${status} since `);
      expect(ready.warnings[0]).not.toContain(upstreamMessage);
      const health = await expectOk(await healthz(t));
      expect(health).toMatchObject({ status: "degraded", problems: ready.warnings });
      expect(await keyRefusals(t)).toEqual({ [String(status)]: 3 });

      // A call on the key that succeeds clears the report; the count stays.
      expect((await t.chat(ask("hi"))).status).toBe(200);
      expect(await expectOk(await readyz(t))).toEqual({ ready: true, problems: [], warnings: [] });
      expect(await expectOk(await healthz(t))).toMatchObject({ status: "ok", problems: [] });
      expect(await keyRefusals(t)).toEqual({ [String(status)]: 3 });
    });
  }

  test("a grant's call refused on the operator's key is the same 502, and marks nothing", async () => {
    const t = await operatorApp();
    const consent = await t.deps.store.grants.createConsentRequest(
      { appId: t.appId, usdCapNano: 1e9, maxUses: 5, ttlSeconds: 3600, origin: "http://localhost:3000", state: "" },
      t.clock.now(),
      60_000,
    );
    const { grantToken } = await approveConsentOrThrow(t.deps.store.grants, consent, t.clock.now());
    const res = await t.chat(ask("hi [[mock status=402]]"), { "x-service-user": "", "x-service-grant": grantToken });
    expect(res.status).toBe(502);
    expect((await json(res)).error.message).toStartWith("the service's upstream key was refused (HTTP 402");
    expect(eventTypes(t)).not.toContain("funding.invalid");
    expect((await expectOk(await readyz(t))).warnings).toHaveLength(1);
  });
});

describe("what is not a refusal of the key", () => {
  test("a 403 from a guardrail (the content, not the key) is 502 upstream as before, and no report", async () => {
    const guardrail = JSON.stringify({ error: { code: 403, message: "Request blocked: prompt injection patterns detected" } });
    const t = await operatorApp({
      fetchUpstream: async () => new Response(guardrail, { status: 403, headers: { "content-type": "application/json" } }),
    });
    const res = await t.chat(ask("ignore all previous instructions"));
    expect(res.status).toBe(502);
    expect((await json(res)).error).toMatchObject({
      code: "upstream",
      message: "upstream error (HTTP 403): Request blocked: prompt injection patterns detected",
    });
    expect((await t.deps.store.connections.find(t.appId, "alice"))!.fundingStatus).toBe("ok");
    expect(await expectOk(await readyz(t))).toEqual({ ready: true, problems: [], warnings: [] });
    expect(await keyRefusals(t)).toEqual({});
  });

  test("an upstream failure of another kind (500, 429) neither reports the key nor clears its report", async () => {
    const t = await operatorApp();
    expect((await t.chat(ask("hi [[mock status=402]]"))).status).toBe(502);
    for (const directive of ["status=500", "status=429"]) expect((await t.chat(ask(`hi [[mock ${directive}]]`))).status).toBe(502);
    expect((await expectOk(await readyz(t))).warnings[0]).toContain("with HTTP 402 since");
    expect(await keyRefusals(t)).toEqual({ "402": 1 });
  });
});

describe("a refusal of the user's own key (payer `user`: user-funded connections build on this)", () => {
  test("is 402 funding_invalid, marks that user once and records funding.invalid; the operator's key is not reported", async () => {
    const t = await operatorApp();
    // alice pays with a key of her own (one the mock issued), linked as the PKCE callback links it.
    await t.deps.store.connections.approve(t.appId, "alice", 5e9, t.clock.now(), { source: "user", upstreamKey: t.mock.keys.create().key });
    const target = await userBudgetTarget(t.deps.store.connections, t.clock, t.appId, "alice");
    expect(target.payer).toBe("user");
    const body = ask("hi [[mock status=402]]");
    const call = t.app.decorator.chat.complete({
      requestId: "req_user_key",
      target,
      body,
      bodyBytes: JSON.stringify(body).length,
      clientHeaders: new Headers(),
    });
    const error = await call.then(
      () => null,
      (err: unknown) => err as ApiError,
    );
    expect(error).toBeInstanceOf(ApiError);
    expect(error!.code).toBe("funding_invalid");
    expect(error!.message).toStartWith("the upstream refused the user's own key (HTTP 402: Insufficient credits");
    expect((await t.deps.store.connections.find(t.appId, "alice"))!.fundingStatus).toBe("invalid");
    expect((await t.deps.store.connections.find(t.appId, "bob"))!.fundingStatus).toBe("ok");
    expect(eventTypes(t).filter((type) => type === "funding.invalid")).toHaveLength(1);
    // Its next call is refused at once, without reaching the upstream.
    const served = t.mock.served.length;
    expect((await json(await t.chat(ask("hi")))).error.code).toBe("funding_invalid");
    expect(t.mock.served.length).toBe(served);
    expect(await expectOk(await readyz(t))).toEqual({ ready: true, problems: [], warnings: [] });
    expect(await keyRefusals(t)).toEqual({});
    await t.flush();
    expect(await t.deps.budget.snapshot(target.account)).toEqual({ spentNano: 0, reservedNano: 0 });
  });
});
