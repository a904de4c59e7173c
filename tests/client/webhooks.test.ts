/**
 * verifyWebhook, the client library's own Standard Webhooks check (Web Crypto): it must
 * accept and refuse exactly what the `standardwebhooks` package (the service's signer)
 * does, and accept real deliveries of a real server, whose events' `data` must have the
 * fields the library's types promise.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import {
  BudgetExceededError,
  createServerClient,
  GrantInvalidError,
  toProxyError,
  verifyWebhook,
  WebhookVerificationError,
  type BudgetThresholdData,
  type ConnectionApprovedData,
  type ConnectionRevokedData,
  type ConnectionUpdatedData,
  type FundingInvalidData,
  type GrantExhaustedData,
  type ServerClient,
  type WebhookEvent,
  type WebhookEventType,
  type WebhookHeaders,
} from "../../packages/client/src/server";
import { fundingInvalidEvent } from "../../src/store/connection-events";
import { pollUntil } from "../helpers/cluster";
import { cliCreateApp, runCliWithEnv, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { fitsKind, shapeOf } from "./shape";

setDefaultTimeout(60_000);

const newSecret = () => `whsec_${randomBytes(32).toString("base64")}`;

describe("verifyWebhook agrees with the standardwebhooks package", () => {
  const secret = newSecret();
  const payload = JSON.stringify({ type: "connection.revoked", timestamp: new Date().toISOString(), data: { appId: "app1", userId: "alice" } });
  const minutes = (n: number) => new Date(Date.now() + n * 60_000);
  function signed(at: Date, { body = payload, key = secret, id = "msg_1" } = {}): Record<string, string> {
    return { "webhook-id": id, "webhook-timestamp": String(Math.floor(at.getTime() / 1000)), "webhook-signature": new Webhook(key).sign(id, at, body) };
  }
  const fresh = signed(new Date());

  const cases: Array<{ name: string; body: string; headers: Record<string, string>; accepted: boolean }> = [
    { name: "a fresh delivery", body: payload, headers: fresh, accepted: true },
    { name: "signed 4 minutes ago", body: payload, headers: signed(minutes(-4)), accepted: true },
    {
      name: "a right signature after a wrong one (key rotation)",
      body: payload,
      headers: { ...fresh, "webhook-signature": `v1,${btoa("x".repeat(32))} ${fresh["webhook-signature"]}` },
      accepted: true,
    },
    { name: "a tampered body", body: payload.replace("alice", "mallory"), headers: fresh, accepted: false },
    { name: "another endpoint's secret", body: payload, headers: signed(new Date(), { key: newSecret() }), accepted: false },
    { name: "another webhook-id than signed", body: payload, headers: { ...fresh, "webhook-id": "msg_2" }, accepted: false },
    { name: "signed 6 minutes ago (a replay)", body: payload, headers: signed(minutes(-6)), accepted: false },
    { name: "signed 6 minutes ahead", body: payload, headers: signed(minutes(6)), accepted: false },
    { name: "a v2 signature", body: payload, headers: { ...fresh, "webhook-signature": fresh["webhook-signature"]!.replace(/^v1,/, "v2,") }, accepted: false },
    { name: "no signature header", body: payload, headers: { "webhook-id": "msg_1", "webhook-timestamp": fresh["webhook-timestamp"]! }, accepted: false },
  ];

  test.each(cases)("$name", async ({ body, headers, accepted }) => {
    const ours = await verifyWebhook(secret, body, headers).then(
      () => true,
      (err: unknown) => (err instanceof WebhookVerificationError ? false : Promise.reject(err)),
    );
    let theirs: boolean;
    try {
      new Webhook(secret).verify(body, headers);
      theirs = true;
    } catch {
      theirs = false;
    }
    expect({ ours, theirs }).toEqual({ ours: accepted, theirs: accepted });
  });

  test("an old timestamp is refused for its age, headers in either form, the body as text or bytes", async () => {
    await expect(verifyWebhook(secret, payload, signed(minutes(-6)))).rejects.toThrow(/timestamp .* away from now/);
    const event = await verifyWebhook(secret, new TextEncoder().encode(payload), new Headers(fresh));
    expect(event).toEqual(JSON.parse(payload));
  });

  test("a genuine signature over something that is not an event: refused", async () => {
    const body = JSON.stringify({ type: "user.deleted", timestamp: new Date().toISOString(), data: {} });
    await expect(verifyWebhook(secret, body, signed(new Date(), { body }))).rejects.toThrow(WebhookVerificationError);
  });
});

/** Every event type's data, field by field, as the types say (the compiler holds these to the types). */
const DATA_SHAPES: { [T in WebhookEventType]: Record<string, string> } = {
  "connection.approved": shapeOf<ConnectionApprovedData>()({ appId: "string", userId: "string", monthlyUsd: "number", connectedAt: "string" }),
  "connection.updated": shapeOf<ConnectionUpdatedData>()({
    appId: "string",
    userId: "string",
    monthlyUsd: "number",
    previousMonthlyUsd: "number",
    fundingRestored: "boolean",
  }),
  "connection.revoked": shapeOf<ConnectionRevokedData>()({ appId: "string", userId: "string" }),
  "funding.invalid": shapeOf<FundingInvalidData>()({ appId: "string", userId: "string" }),
  "budget.threshold": shapeOf<BudgetThresholdData>()({
    appId: "string",
    userId: "string",
    threshold: "number",
    reason: "string",
    usedPercent: "number",
    limitUsd: "number",
    usedUsd: "number",
    period: "object",
    resetsAt: "string",
  }),
  "grant.exhausted": shapeOf<GrantExhaustedData>()({
    appId: "string",
    grantId: "string",
    reason: "string",
    usdCap: "number",
    usedUsd: "number",
    uses: "number",
    maxUses: "number|null",
  }),
};

function expectDataFits(event: WebhookEvent | { type: WebhookEventType; data: object }): void {
  const shape = DATA_SHAPES[event.type];
  const data = event.data as Record<string, unknown>;
  expect(Object.keys(data).sort()).toEqual(Object.keys(shape).sort());
  for (const [field, kind] of Object.entries(shape)) expect({ field, fits: fitsKind(data[field], kind) }).toEqual({ field, fits: true });
}

test("funding.invalid's data, as the service builds it, has the fields of FundingInvalidData", () => {
  expectDataFits(fundingInvalidEvent("app1", "alice") as { type: WebhookEventType; data: object });
});

describe("real deliveries from a real server", () => {
  const ORIGIN = "http://localhost:3000";
  // The receiver is on this machine: allowed only with this setting (ARCHITECTURE.md §6).
  const LOCAL_RECEIVERS = { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true" };
  const db = tempDatabase();
  const deliveries: Array<{ body: string; headers: Record<string, string> }> = [];
  let receiver: ReturnType<typeof Bun.serve>;
  let server: RunningServer;
  let client: ServerClient;
  let secret: string;

  beforeAll(async () => {
    // The app's webhook route: records each request's raw body and headers, answers 204.
    receiver = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async (request) => {
        deliveries.push({ body: await request.text(), headers: Object.fromEntries(request.headers) });
        return new Response(null, { status: 204 });
      },
    });
    const app = await cliCreateApp(db.databaseUrl, "hooks", [ORIGIN]);
    const added = await runCliWithEnv(
      { ...LOCAL_RECEIVERS, DATABASE_URL: db.databaseUrl },
      "webhook",
      "add",
      "--app",
      app.appId,
      "--url",
      `http://127.0.0.1:${receiver.port}/hooks`,
    );
    expect(added.code).toBe(0);
    secret = added.json[0]!.secret;
    server = await startServer({ databaseUrl: db.databaseUrl, env: { WEBHOOK_POLL_MS: "50", ...LOCAL_RECEIVERS } });
    client = createServerClient({ baseUrl: server.baseUrl, secretKey: app.secretKey });
    await causeEvents(app.appId);
  });
  afterAll(async () => {
    await server?.stop();
    await receiver?.stop(true);
    db.cleanup();
  });

  async function withSession(appUserId: string, requestLimitUsd: number, method: "POST" | "DELETE"): Promise<void> {
    const { token } = await client.createSession({ appUserId, requestLimitUsd });
    const res = await server.fetch("/api/v1/connections", {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: "{}",
    });
    expect(res.status).toBe(method === "POST" ? 200 : 204);
  }

  /** Approve, raise and revoke dana's cap; spend over 80 % of carol's; use up a one-use grant. */
  async function causeEvents(appId: string): Promise<void> {
    await withSession("dana", 5, "POST");
    await withSession("dana", 7, "POST");
    await withSession("dana", 7, "DELETE");
    await withSession("carol", 0.01, "POST");
    // gpt-4o: 1000 completion tokens cost the whole $0.01, so the first call is shrunk to what
    // the cap affords beside its prompt's bound (over 80 % of it), and a later one is refused.
    const carol = client.chat({ user: "carol" }, { maxRetries: 0 });
    const tellMore = { model: "openai/gpt-4o", max_tokens: 1000, messages: [{ role: "user" as const, content: "Tell me more [[mock tokens=1000]]" }] };
    let refusal: unknown = null;
    for (let call = 0; call < 4 && !refusal; call++) refusal = await carol.chat.completions.create(tellMore).then(() => null, toProxyError);
    expect(refusal).toBeInstanceOf(BudgetExceededError);
    const grantToken = await oneUseGrant(appId);
    const openai = client.chat({ grant: grantToken }, { maxRetries: 0 });
    await openai.chat.completions.create({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }] });
    const refused = await openai.chat.completions.create({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }).catch(toProxyError);
    expect(refused).toBeInstanceOf(GrantInvalidError);
  }

  /** A grant as the consent popup makes one: open the page, approve it from the page itself. */
  async function oneUseGrant(appId: string): Promise<string> {
    const query = new URLSearchParams({ appId, usd: "1", maxUses: "1", origin: ORIGIN, state: "s1" });
    const page = await server.fetch(`/api/v1/grants/consent?${query}`);
    expect(page.status).toBe(200);
    const consentToken = /"consentToken":"(ct_[0-9A-Za-z]+)"/.exec(await page.text())![1];
    const approved = await server.fetch("/api/v1/grants/consent", {
      method: "POST",
      headers: { "content-type": "application/json", "sec-fetch-site": "same-origin" },
      body: JSON.stringify({ consentToken }),
    });
    expect(approved.status).toBe(200);
    return ((await approved.json()) as { grantToken: string }).grantToken;
  }

  const EXPECTED: WebhookEventType[] = ["connection.approved", "connection.updated", "connection.revoked", "budget.threshold", "grant.exhausted"];

  test("every delivery verifies, and each event's data has the fields of its type", async () => {
    const types = () => new Set(deliveries.map((d) => (JSON.parse(d.body) as { type: WebhookEventType }).type));
    await pollUntil("the five event types", async () => (EXPECTED.every((t) => types().has(t)) ? true : undefined));
    for (const { body, headers } of deliveries) {
      const event = await verifyWebhook(secret, body, headers);
      expect(event).toEqual(JSON.parse(body));
      expectDataFits(event);
    }
    const events = deliveries.map((d) => JSON.parse(d.body) as WebhookEvent);
    expect(events.find((e) => e.type === "connection.updated")?.data).toMatchObject({ userId: "dana", monthlyUsd: 7, previousMonthlyUsd: 5 });
    const thresholds = events.flatMap((e) => (e.type === "budget.threshold" ? [e.data.threshold] : []));
    expect(thresholds).toContain(80);
    expect(events.find((e) => e.type === "grant.exhausted")?.data).toMatchObject({ reason: "uses", uses: 1, maxUses: 1 });
  });

  test("a real delivery with a tampered body or checked with another secret: refused", async () => {
    const { body, headers } = deliveries[0]!;
    const tampered = body.replace(/"userId":"[^"]*"/, '"userId":"mallory"');
    expect(tampered).not.toBe(body);
    await expect(verifyWebhook(secret, tampered, headers)).rejects.toThrow(WebhookVerificationError);
    await expect(verifyWebhook(newSecret(), body, headers as WebhookHeaders)).rejects.toThrow(/no webhook-signature matches/);
  });
});
