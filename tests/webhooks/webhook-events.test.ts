/**
 * Every webhook event type, caused the way it happens in service (the HTTP API, a chat call
 * whose user's own key the upstream refuses, spend crossing a threshold, a grant used up), delivered by the
 * dispatcher to a receiver in its own process that verifies each signature.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";
import { startReceiver, type ReceiverProcess } from "../helpers/webhook-receiver-process";
import { OperatorService } from "../../src/services/operator";
import { WebhookDispatcher } from "../../src/webhooks/dispatcher";
import type { WebhookEventType } from "../../src/store/webhooks";
import { approveConsentOrThrow } from "../helpers/grants";

let receiver: ReceiverProcess;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.stop();
});

// The receiver is on this machine: allowed only with WEBHOOK_ALLOW_PRIVATE_ADDRESSES.
const LOCAL_RECEIVERS = { allowPrivateAddresses: true };
const operator = () => new OperatorService(t.deps.store, t.clock, undefined, { allowPrivateWebhookAddresses: true });

let t: ChatTestApp;
let dispatcher: WebhookDispatcher;
let seen = 0;

beforeEach(async () => {
  t = await chatTestApp({ env: { RL_CHAT_LIMIT: "100000" } });
  const endpoint = await operator().webhooks.add(t.appId, { url: receiver.url });
  await receiver.control({ secret: endpoint.secret, fail: 0 });
  const options = { pollMs: 1000, retryScheduleMs: [1000], timeoutMs: 5000, ...LOCAL_RECEIVERS };
  dispatcher = new WebhookDispatcher(t.deps.store.webhooks, t.clock, t.deps.logger, options);
  seen = (await receiver.received()).length;
});

/** Checks thresholds, sends what is due, and returns the events the receiver verified since the test began. */
async function deliveredEvents() {
  await t.deps.budgetWatcher.check();
  await dispatcher.runRound();
  const all = (await receiver.received()).slice(seen);
  expect(all.every((r) => r.verified)).toBe(true);
  return all.map((r) => r.event!);
}

const types = (events: Array<{ type: string }>) => events.map((e) => e.type as WebhookEventType);

async function session(userId: string, limitUsd?: number): Promise<string> {
  const res = await t.app.handle(
    new Request("http://localhost/api/v1/sessions", {
      method: "POST",
      headers: { authorization: `Bearer ${t.secretKey}`, "content-type": "application/json" },
      body: JSON.stringify({ appUserId: userId, ...(limitUsd ? { requestLimit: { monthlyUsd: limitUsd } } : {}) }),
    }),
  );
  return ((await res.json()) as { token: string }).token;
}

const connections = (token: string, method: string, body?: unknown) =>
  t.app.handle(
    new Request("http://localhost/api/v1/connections", {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", origin: "http://localhost:3000" },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
  );

const ask = (content: string) => ({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content }] });

describe("webhook events", () => {
  test("connection.approved, .updated and .revoked from the browser's calls, in order, signed", async () => {
    const token = await session("alice", 20);
    expect((await connections(token, "POST", { monthlyUsd: 10 })).status).toBe(200);
    expect((await connections(token, "POST", { monthlyUsd: 15 })).status).toBe(200);
    expect((await connections(token, "DELETE")).status).toBeLessThan(300);
    // A second revoke changes nothing, so it reports nothing.
    await connections(token, "DELETE");
    const events = await deliveredEvents();
    expect(types(events)).toEqual(["connection.approved", "connection.updated", "connection.revoked"]);
    expect(events[0]!.data).toMatchObject({ appId: t.appId, userId: "alice", monthlyUsd: 10 });
    expect(events[1]!.data).toMatchObject({ userId: "alice", monthlyUsd: 15, previousMonthlyUsd: 10 });
    expect(events[2]!.data).toEqual({ appId: t.appId, userId: "alice" });
  });

  test("funding.invalid once when the upstream refuses the user's own key, not again while it stays invalid; never for the operator's key", async () => {
    // alice pays with a key of her own (one the mock issued), linked as the PKCE callback links it.
    await t.deps.store.connections.approve(t.appId, "alice", 5e9, t.clock.now(), { source: "user", upstreamKey: t.mock.keys.create().key });
    await t.connect("bob", 5);
    // The operator's key refused is the operator's problem: no user's event.
    expect((await t.chat(ask("hi [[mock status=402]]"), { "x-service-user": "bob" })).status).toBe(502);
    // A call paid by alice's own key, refused.
    const own = await t.chat(ask("hi [[mock status=402]]"));
    expect({ status: own.status, body: await own.json() }).toMatchObject({ status: 402, body: { error: { code: "funding_invalid" } } });
    expect((await t.chat(ask("hi"))).status).toBe(402);
    const events = await deliveredEvents();
    expect(types(events)).toEqual(["connection.approved", "connection.approved", "funding.invalid"]);
    expect(events[2]!.data).toEqual({ appId: t.appId, userId: "alice" });
  });

  test("budget.threshold at 80 % and at 100 %, each once per period, 80 % first", async () => {
    await t.connect("alice", 0.002);
    const thresholds = async () => (await deliveredEvents()).filter((e) => e.type === "budget.threshold").map((e) => e.data.threshold);
    // Call until refused, looking after each call: 80 % must be reported while calls still pass.
    let refused = false;
    let whenEightySeen: boolean | null = null;
    for (let i = 0; i < 200 && !refused; i++) {
      refused = (await t.chat(ask("hello there"))).status === 402;
      if (whenEightySeen === null && (await thresholds()).includes(80)) whenEightySeen = refused;
    }
    expect(refused).toBe(true);
    expect(whenEightySeen).toBe(false);
    await t.chat(ask("hello there"));
    const events = (await deliveredEvents()).filter((e) => e.type === "budget.threshold");
    expect(events.map((e) => e.data.threshold)).toEqual([80, 100]);
    for (const e of events) {
      expect(e.data).toMatchObject({ appId: t.appId, userId: "alice", limitUsd: 0.002 });
      expect(e.data.usedUsd).toBeGreaterThanOrEqual(0.002 * 0.8);
      // The share spent, to a hundredth of a percent, rounded down: at the level when spent, below it when refused.
      const [spentNano, capNano] = [e.data.usedUsd, e.data.limitUsd].map((usd) => BigInt(Math.round(usd * 1e9)));
      expect(e.data.usedPercent).toBe(Number((spentNano! * 10_000n) / capNano!) / 100);
      expect(e.data.reason).toBe(e.data.usedPercent >= e.data.threshold ? "spent" : "refused");
    }
    // 80 % was reported while calls still passed: spend reached it.
    expect(events[0]!.data.reason).toBe("spent");
    // Nothing new however often it is checked again.
    await t.chat(ask("hello there"));
    expect(await thresholds()).toEqual([80, 100]);
  });

  test("budget.threshold at 100 % says `refused` when a call is refused before spend reaches the cap", async () => {
    await t.connect("alice", 0.01);
    // About 84 % of the cap: 14 000 completion tokens at $0.60 per million, and a short prompt.
    expect((await t.chat({ ...ask("[[mock tokens=14000]]"), max_tokens: 14_000 })).status).toBe(200);
    await t.flush();
    // A prompt of 20 000 bytes is reserved at up to 20 000 tokens ($0.003): more than the rest.
    expect((await t.chat(ask("a".repeat(20_000)))).status).toBe(402);
    const events = (await deliveredEvents()).filter((e) => e.type === "budget.threshold");
    expect(events.map((e) => ({ threshold: e.data.threshold, reason: e.data.reason }))).toEqual([
      { threshold: 80, reason: "spent" },
      { threshold: 100, reason: "refused" },
    ]);
    const percent = events[1]!.data.usedPercent;
    expect(percent).toBeGreaterThanOrEqual(84);
    expect(percent).toBeLessThan(85);
    expect(events[0]!.data.usedPercent).toBe(percent);
  });

  test("a threshold check that fails (store down) is made again at the next poll", async () => {
    await t.connect("alice", 0.002);
    for (let i = 0; i < 200; i++) if ((await t.chat(ask("hello there"))).status === 402) break;
    const repo = t.deps.store.webhooks;
    const record = repo.record.bind(repo);
    repo.record = async () => {
      throw new Error("database unavailable");
    };
    await t.deps.budgetWatcher.check();
    expect(t.logs.some((l) => l.includes("budget threshold check failed"))).toBe(true);
    repo.record = record;
    const events = (await deliveredEvents()).filter((e) => e.type === "budget.threshold");
    expect(events.map((e) => e.data.threshold)).toEqual([80, 100]);
  });

  test("grant.exhausted when a grant's last use is spent", async () => {
    const consent = await t.deps.store.grants.createConsentRequest(
      { appId: t.appId, usdCapNano: 1e9, maxUses: 1, ttlSeconds: 3600, origin: "http://localhost:3000", state: "" },
      t.clock.now(),
      60_000,
    );
    const { grant, grantToken } = await approveConsentOrThrow(t.deps.store.grants, consent, t.clock.now());
    const withGrant = { "x-service-user": "", "x-service-grant": grantToken };
    expect((await t.chat(ask("hi"), withGrant)).status).toBe(200);
    expect((await t.chat(ask("hi"), withGrant)).status).toBe(402);
    const events = await deliveredEvents();
    expect(types(events)).toEqual(["grant.exhausted"]);
    expect(events[0]!.data).toMatchObject({ appId: t.appId, grantId: grant.id, reason: "uses", uses: 1, maxUses: 1 });
  });

  test("an endpoint subscribed to some types gets only those; a disabled one gets nothing", async () => {
    const ops = operator().webhooks;
    const [all] = await ops.list(t.appId);
    await ops.disable(t.appId, all!.endpointId);
    const only = await ops.add(t.appId, { url: receiver.url, events: ["connection.revoked"] });
    await receiver.control({ secret: only.secret });
    const token = await session("bob", 20);
    await connections(token, "POST", { monthlyUsd: 10 });
    await connections(token, "DELETE");
    expect(types(await deliveredEvents())).toEqual(["connection.revoked"]);
  });
});
