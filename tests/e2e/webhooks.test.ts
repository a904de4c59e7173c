/**
 * Webhooks end to end, as an operator and an app run them: the endpoint registered with the
 * CLI, a real server process, and a receiver in its own process that verifies every
 * signature with the `standardwebhooks` package. Delivery, a retry after the receiver
 * fails, an event caused by the CLI in another process, budget thresholds and why each
 * fired, and an event that survives a SIGKILL of the proxy while its receiver is down
 * (listed meanwhile as `unreachable`). The receiver is on this machine, which only
 * WEBHOOK_ALLOW_PRIVATE_ADDRESSES allows.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cliCreateApp, connectOverHttp, runCli, runCliWithEnv, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { pollUntil } from "../helpers/cluster";
import { startReceiver, type ReceivedWebhook, type ReceiverProcess } from "../helpers/webhook-receiver-process";

const db = tempDatabase();
// Fast polls and retries, so that the test waits on delivery and not on the production schedule.
const METRICS_TOKEN = "metrics-token-for-webhook-tests";
// The receivers are on this machine: allowed only with WEBHOOK_ALLOW_PRIVATE_ADDRESSES (ARCHITECTURE.md §6).
const LOCAL_RECEIVERS = { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true" };
const ENV = { WEBHOOK_POLL_MS: "50", WEBHOOK_RETRY_SCHEDULE_SECONDS: Array(20).fill("0.2").join(","), METRICS_TOKEN, ...LOCAL_RECEIVERS };
let receiver: ReceiverProcess;
let server: RunningServer;
let app: { appId: string; secretKey: string };
let secret: string;

beforeAll(async () => {
  receiver = await startReceiver();
  app = await cliCreateApp(db.databaseUrl, "hooks");
  const added = await runCliWithEnv({ ...LOCAL_RECEIVERS, DATABASE_URL: db.databaseUrl }, "webhook", "add", "--app", app.appId, "--url", receiver.url);
  expect(added.code).toBe(0);
  secret = added.json[0]!.secret;
  await receiver.control({ secret });
  server = await startServer({ databaseUrl: db.databaseUrl, env: ENV });
});
afterAll(async () => {
  await server?.stop();
  await receiver?.stop();
  db.cleanup();
});

/** Waits until the receiver has accepted (204, signature verified) an event matching `match`. */
function accepted(what: string, match: (r: ReceivedWebhook) => boolean): Promise<ReceivedWebhook> {
  return pollUntil(what, async () => (await receiver.received()).find((r) => r.verified && r.status === 204 && match(r)));
}

const about = (type: string, userId: string) => (r: ReceivedWebhook) => r.event?.type === type && r.event.data.userId === userId;

describe("webhooks end to end", () => {
  test("the CLI registers an endpoint and shows its secret once", async () => {
    expect(secret).toMatch(/^whsec_/);
    const listed = await runCli(db.databaseUrl, "webhook", "list", "--app", app.appId);
    expect(listed.json).toEqual([expect.objectContaining({ url: receiver.url, events: "all", disabledAt: null })]);
    expect(listed.stdout).not.toContain(secret);
  });

  test("without WEBHOOK_ALLOW_PRIVATE_ADDRESSES the CLI refuses a receiver on this machine or a private network", async () => {
    for (const url of [receiver.url, "https://169.254.169.254/latest"]) {
      const refused = await runCli(db.databaseUrl, "webhook", "add", "--app", app.appId, "--url", url);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain("WEBHOOK_ALLOW_PRIVATE_ADDRESSES=true");
    }
    expect((await runCli(db.databaseUrl, "webhook", "list", "--app", app.appId)).json).toHaveLength(1);
  });

  test("a user's approval reaches the receiver, signed, with the Standard Webhooks payload", async () => {
    await connectOverHttp(server, app.secretKey, "alice", 5);
    const got = await accepted("alice's connection.approved", about("connection.approved", "alice"));
    expect(got.webhookId).toMatch(/^msg_/);
    expect(got.event).toMatchObject({ type: "connection.approved", data: { appId: app.appId, userId: "alice", monthlyUsd: 5 } });
    expect(Date.parse(got.event!.timestamp)).not.toBeNaN();
  });

  test("a receiver failure is retried until it is accepted; the CLI shows the attempts", async () => {
    await receiver.control({ fail: 2, status: 500 });
    await connectOverHttp(server, app.secretKey, "bob", 5);
    const got = await accepted("bob's connection.approved after two failures", about("connection.approved", "bob"));
    const attempts = (await receiver.received()).filter((r) => r.webhookId === got.webhookId);
    expect(attempts.map((r) => r.status)).toEqual([500, 500, 204]);
    const listed = await runCli(db.databaseUrl, "webhook", "deliveries", "--app", app.appId);
    expect(listed.json.find((d) => d.eventId === got.webhookId)).toMatchObject({ state: "delivered", attempts: 3, lastStatus: 204 });
    const metrics = await (await server.fetch("/metrics", { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    expect(Number(/^proxy_webhook_failed_attempts (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(2);
    expect(Number(/^proxy_webhook_delivered (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(2);
  });

  test("an operator's revoke in the CLI process is delivered by the server", async () => {
    const revoked = await runCli(db.databaseUrl, "connections", "revoke", "--app", app.appId, "--user", "alice");
    expect(revoked.code).toBe(0);
    await accepted("alice's connection.revoked", about("connection.revoked", "alice"));
  });

  test("budget thresholds say why: 80 % when spend reached it, 100 % when a call was refused short of the cap", async () => {
    await connectOverHttp(server, app.secretKey, "dave", 0.01);
    const chat = (content: string, maxTokens?: number) =>
      server.fetch("/api/v1/chat/completions", {
        method: "POST",
        headers: { authorization: `Bearer ${app.secretKey}`, "content-type": "application/json", "x-service-user": "dave" },
        body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content }], ...(maxTokens ? { max_tokens: maxTokens } : {}) }),
      });
    // About 84 % of the $0.01 cap: 14 000 completion tokens at $0.60 per million, and a short prompt.
    expect((await chat("[[mock tokens=14000]]", 14_000)).status).toBe(200);
    const threshold = (level: number) => (r: ReceivedWebhook) => about("budget.threshold", "dave")(r) && r.event!.data.threshold === level;
    // Delivered once the spend is counted, so the refusal below is seen against it.
    const eighty = await accepted("dave's 80 % threshold", threshold(80));
    // A 20 000-byte prompt is reserved at up to 20 000 tokens ($0.003): more than the rest of the cap.
    expect((await chat("a".repeat(20_000))).status).toBe(402);
    const hundred = await accepted("dave's 100 % threshold", threshold(100));
    expect(eighty.event!.data).toMatchObject({ reason: "spent", limitUsd: 0.01 });
    expect(hundred.event!.data).toMatchObject({ reason: "refused", limitUsd: 0.01, usedPercent: eighty.event!.data.usedPercent });
    expect(hundred.event!.data.usedPercent).toBeGreaterThanOrEqual(84);
    expect(hundred.event!.data.usedPercent).toBeLessThan(85);
  });

  test("the signing secret never reaches the server's log", () => {
    // The server held it for every signature above; ARCHITECTURE.md §3: no secret in logs.
    expect(server.stdout.length + server.stderr.length).toBeGreaterThan(0);
    expect([...server.stdout, ...server.stderr].filter((line) => line.includes(secret.slice("whsec_".length)))).toEqual([]);
  });

  test("an event recorded before a SIGKILL, with its receiver down, is delivered after both come back", async () => {
    const port = receiver.port;
    await receiver.stop();
    await connectOverHttp(server, app.secretKey, "carol", 5);
    // The proxy has at least tried (and failed) before it is killed.
    const failed = await pollUntil("a failed attempt for carol", async () => {
      const listed = await runCli(db.databaseUrl, "webhook", "deliveries", "--app", app.appId, "--limit", "1");
      return listed.json[0]?.attempts > 0 ? listed.json[0] : undefined;
    });
    // Listed as a class, never the system's message (which would tell a port scan what it found).
    expect(failed).toMatchObject({ state: "pending", lastStatus: null, lastError: "unreachable" });
    server.proc.kill("SIGKILL");
    await server.proc.exited;
    receiver = await startReceiver(port);
    await receiver.control({ secret });
    server = await startServer({ databaseUrl: db.databaseUrl, env: ENV });
    const got = await accepted("carol's connection.approved after the restart", about("connection.approved", "carol"));
    expect((await receiver.received()).filter((r) => r.webhookId === got.webhookId)).toHaveLength(1);
  });
});
