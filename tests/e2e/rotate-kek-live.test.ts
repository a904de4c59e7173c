/**
 * `keys rotate-kek` run while a server holding only the old key is live (issue 56): that
 * server refuses to seal new secrets once the store's key check moved to a key it lacks
 * (503 `unavailable` in the envelope, said once in its log), so nothing is left sealed under
 * the retired key; its webhook deliveries to the re-sealed endpoint fail alone as
 * `secret_unreadable` (listed, and counted in /metrics). Restarted with the new key, it
 * serves as before. A real server process (the bundle) and the real CLI, on a SQLite file.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../src/config";
import { resolveSecretBox } from "../../src/secrets/secrets-key";
import { SecretBox } from "../../src/secrets/secret-box";
import { openSqliteStore } from "../../src/store/sqlite";
import { ADMIN, ADMIN_TOKEN } from "../helpers/admin";
import { pollUntil } from "../helpers/cluster";
import { runCli, runCliWithEnv, startServer, tempDatabase, type RunningServer } from "../helpers/server";

const METRICS_TOKEN = "metrics-token-for-the-rotation-test-0123";
const db = tempDatabase();
const servers: RunningServer[] = [];
afterAll(async () => {
  for (const server of servers) await server.stop();
  db.cleanup();
});

const admin = (server: RunningServer, path: string, init: RequestInit = {}) =>
  server.fetch(`${ADMIN}${path}`, { ...init, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" } });
const addWebhook = (server: RunningServer, appId: string, url: string) =>
  admin(server, `/apps/${appId}/webhooks`, { method: "POST", body: JSON.stringify({ url }) });

async function sessionToken(server: RunningServer, secretKey: string, appUserId: string): Promise<string> {
  const res = await server.fetch("/api/v1/sessions", {
    method: "POST",
    headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/json" },
    body: JSON.stringify({ appUserId }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { token: string }).token;
}

describe("keys rotate-kek with a server on the old key still running", () => {
  test("that server refuses to seal (503, logged once), none is left under the old key, its deliveries fail alone; restarted with the new key it serves", async () => {
    const env = { ADMIN_TOKEN, METRICS_TOKEN, WEBHOOK_POLL_MS: "50" };
    const stale = await startServer({ databaseUrl: db.databaseUrl, env });
    servers.push(stale);
    const created = await runCli(db.databaseUrl, "app", "create", "--name", "rotating", "--funding-sources", "app,user");
    const { appId, secretKey } = created.json[0] as { appId: string; secretKey: string };
    expect((await addWebhook(stale, appId, "https://hooks.example/before")).status).toBe(201);

    const oldKey = readFileSync(join(db.dir, "data", "secrets.key"), "utf8").trim();
    const newKey = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64");
    const newKeyId = resolveSecretBox(loadConfig({ SECRETS_KEY: newKey }), () => {}).current.id;
    const rotated = await runCliWithEnv({ DATABASE_URL: db.databaseUrl, SECRETS_KEY: newKey, SECRETS_KEY_PREVIOUS: oldKey }, "keys", "rotate-kek");
    expect(rotated.code).toBe(0);
    expect(rotated.json[0]).toMatchObject({ keyId: newKeyId, webhookSecrets: 1 });

    // New secrets on the stale server: a webhook endpoint (admin API), a link of the user's own account (session token).
    for (let i = 0; i < 2; i++) {
      const refused = await addWebhook(stale, appId, `https://hooks.example/after-${i}`);
      expect(refused.status).toBe(503);
      const { error } = (await refused.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe("unavailable");
      expect(error.message).toContain("restarted with its new secrets key");
    }
    const token = await sessionToken(stale, secretKey, "linker");
    const link = await stale.fetch("/api/v1/connections/funding", {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ monthlyUsd: 5 }),
    });
    expect(link.status).toBe(503);
    expect(((await link.json()) as { error: { code: string } }).error.code).toBe("unavailable");
    const said = () => stale.logLines().filter((l) => String(l.msg).includes("re-sealed under secrets key id"));
    expect(said()).toHaveLength(1);
    expect(String(said()[0]!.msg)).toContain(newKeyId);
    expect(stale.stdout.join("\n") + stale.stderr.join("\n")).not.toContain(newKey);

    // A change the stale server can still make (an app-funded approval seals nothing) emits an
    // event for the endpoint re-sealed under the new key: that delivery fails alone, as its class.
    const approved = await stale.fetch("/api/v1/connections", {
      method: "POST",
      headers: { authorization: `Bearer ${await sessionToken(stale, secretKey, "alice")}`, "content-type": "application/json" },
      body: JSON.stringify({ monthlyUsd: 5 }),
    });
    expect(approved.status).toBe(200);
    const withNewKey = { DATABASE_URL: db.databaseUrl, SECRETS_KEY: newKey };
    await pollUntil("the delivery's failure", async () => {
      const [delivery] = (await runCliWithEnv(withNewKey, "webhook", "deliveries", "--app", appId)).json;
      return delivery?.lastError === "secret_unreadable" ? delivery : undefined;
    });
    const metrics = await (await stale.fetch("/metrics", { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    expect(Number(/^proxy_webhook_secret_unreadable (\d+)$/m.exec(metrics)![1])).toBeGreaterThanOrEqual(1);
    const listed = (await (await admin(stale, `/apps/${appId}/webhooks`)).json()) as { data: Array<{ url: string; secretState: string }> };
    expect(listed.data.map((e) => [e.url, e.secretState])).toEqual([["https://hooks.example/before", "unreadable"]]);

    // Nothing the store keeps is sealed under the retired key: the new key alone opens it all.
    const store = openSqliteStore(
      db.path,
      resolveSecretBox(loadConfig(withNewKey), () => {}),
    );
    try {
      const sealed = [...(await store.webhooks.storedSecrets()), ...(await store.fundingFlows.storedVerifiers())].map((s) => s.stored);
      expect(sealed).toHaveLength(1);
      for (const value of sealed) expect(SecretBox.keyIdOf(value)).toBe(newKeyId);
    } finally {
      await store.close();
    }

    // Restarted with the new key, the same server seals again.
    await stale.stop();
    servers.length = 0;
    const fresh = await startServer({ databaseUrl: db.databaseUrl, env: { ...env, SECRETS_KEY: newKey } });
    servers.push(fresh);
    expect((await addWebhook(fresh, appId, "https://hooks.example/after-restart")).status).toBe(201);
    const relisted = (await (await admin(fresh, `/apps/${appId}/webhooks`)).json()) as { data: Array<{ secretState: string }> };
    expect(relisted.data.map((e) => e.secretState)).toEqual(["readable", "readable"]);
  });
});
