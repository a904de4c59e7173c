/**
 * Funding and the user's key as an operator meets them, with real processes on a SQLite file:
 * `--funding-sources` on app create and update; a user's own upstream key that appears in
 * no command's output, no API answer, no metric, no log line and nowhere in the database's
 * files in clear, and whose sealed bytes leave the files when the connection is revoked;
 * `keys rotate-kek` moving every sealed value to a new key, then nothing on a second run.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../src/config";
import { resolveSecretBox } from "../../src/secrets/secrets-key";
import { SecretBox } from "../../src/secrets/secret-box";
import { openSqliteStore } from "../../src/store/sqlite";
import { ADMIN_TOKEN } from "../helpers/admin";
import { pollUntil } from "../helpers/cluster";
import { sqliteFileBytes } from "../helpers/store-engines";
import { cliCreateApp, runCli, runCliWithEnv, startServer, tempDatabase, type RunningServer } from "../helpers/server";

/** Distinctive, so that any copy of it, anywhere, is found. */
const USER_KEY = "sk-or-v1-leakcheck-4e0c7a19b2d85f63e1a0c9d7b4f2e816";
const METRICS_TOKEN = "metrics-token-for-the-funding-test-0123";

const db = tempDatabase();
let server: RunningServer;
beforeAll(async () => {
  server = await startServer({ databaseUrl: db.databaseUrl, env: { ADMIN_TOKEN, METRICS_TOKEN } });
});
afterAll(async () => {
  await server?.stop();
  db.cleanup();
});

/** The store as the server and the CLI open it: the same file, the same secrets key. */
const openOperatorStore = (databaseUrl: string, env: Record<string, string> = {}) =>
  openSqliteStore(
    databaseUrl.slice("sqlite:".length),
    resolveSecretBox(loadConfig({ DATABASE_URL: databaseUrl, ...env }), () => {}),
  );

describe("--funding-sources", () => {
  test("set at creation and by update, shown by list; left out, app create's line keeps its fixed keys; a wrong word exits 2 naming the flag", async () => {
    const plain = await runCli(db.databaseUrl, "app", "create", "--name", "plain");
    expect(plain.json[0]).not.toHaveProperty("fundingSources");
    const both = await runCli(db.databaseUrl, "app", "create", "--name", "both", "--funding-sources", "user, app");
    expect(both.json[0]).toMatchObject({ name: "both", fundingSources: ["app", "user"] });
    const appId = both.json[0]!.appId as string;
    const updated = await runCli(db.databaseUrl, "app", "update", "--app", appId, "--funding-sources", "user");
    expect(updated.json[0]).toMatchObject({ appId, fundingSources: ["user"] });
    expect((await runCli(db.databaseUrl, "app", "show", "--app", appId)).json[0]).toMatchObject({ fundingSources: ["user"] });
    const listed = await runCli(db.databaseUrl, "app", "list");
    expect(listed.json.find((a) => a.appId === plain.json[0]!.appId)).toMatchObject({ fundingSources: ["app"] });

    const refusals: Array<[string, string]> = [
      ["app,operator", '--funding-sources: "operator" is not a funding source (app, user)'],
      ["app,", '--funding-sources: "" is not a funding source'],
      ["apps,users", '--funding-sources: "apps", "users" are not funding sources (app, user)'],
    ];
    for (const [bad, message] of refusals) {
      const refused = await runCli(db.databaseUrl, "app", "update", "--app", appId, `--funding-sources=${bad}`);
      expect({ bad, code: refused.code }).toEqual({ bad, code: 2 });
      expect(refused.stderr).toContain(message);
    }
    expect((await runCli(db.databaseUrl, "app", "show", "--app", appId)).json[0]).toMatchObject({ fundingSources: ["user"] });
    const help = await runCli(db.databaseUrl, "app", "create", "--help");
    expect(help.stdout).toContain("--funding-sources          app: the operator's upstream key pays every call");
  });
});

describe("a user's own upstream key", () => {
  test("appears in no output, answer, metric, log line or file in clear; revoking deletes it from the files", async () => {
    const { appId, secretKey } = await cliCreateApp(db.databaseUrl, "leak check");
    await runCli(db.databaseUrl, "app", "update", "--app", appId, "--funding-sources", "app,user");
    const store = openOperatorStore(db.databaseUrl);
    try {
      await store.connections.approve(appId, "payer", 5e9, Date.now(), { source: "user", upstreamKey: USER_KEY });
      const chat = await server.fetch("/api/v1/chat/completions", {
        method: "POST",
        headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/json", "x-service-user": "payer" },
        body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi [[mock tokens=3]]" }], max_tokens: 8 }),
      });
      expect(chat.status).toBe(200);
      await chat.text();

      const outputs: string[] = [];
      const cli = async (...args: string[]) => {
        const run = await runCli(db.databaseUrl, ...args);
        expect({ args, code: run.code }).toEqual({ args, code: 0 });
        outputs.push(run.stdout, run.stderr);
        return run;
      };
      const shown = await pollUntil("the payer's usage recorded", async () => {
        const run = await cli("connections", "show", "--app", appId, "--user", "payer");
        return run.json[0]!.usedUsd > 0 ? run.json[0]! : undefined;
      });
      expect(shown).toMatchObject({ fundingSource: "user", userKey: { fingerprint: expect.stringMatching(/^sha256:[0-9a-f]{12}$/) } });
      expect((await cli("connections", "list", "--app", appId)).json[0]).toMatchObject({ appUserId: "payer", fundingSource: "user" });
      await cli("app", "show", "--app", appId);
      await cli("app", "list");
      const day = new Date().toISOString().slice(0, 10);
      expect((await cli("usage", "export", "--app", appId, "--from", day, "--to", day)).json).toHaveLength(1);
      await cli("usage", "export", "--app", appId, "--from", day, "--to", day, "--format", "csv");

      const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
      for (const [path, token] of [
        ["/api/v1/status?appUserId=payer", secretKey],
        [`/api/v1/usage?appUserId=payer`, secretKey],
        [`/api/v1/admin/apps/${appId}/connections`, ADMIN_TOKEN],
        [`/api/v1/admin/apps/${appId}/connections/payer`, ADMIN_TOKEN],
        [`/api/v1/admin/apps/${appId}/usage?from=${day}&to=${day}`, ADMIN_TOKEN],
        ["/metrics", METRICS_TOKEN],
        ["/healthz", METRICS_TOKEN],
      ] as const) {
        const res = await server.fetch(path, bearer(token));
        expect({ path, status: res.status }).toEqual({ path, status: 200 });
        outputs.push(await res.text());
      }
      expect(outputs.join("\n")).toContain("sha256:"); // the views were read, with the key's fingerprint
      for (const output of outputs) expect(output).not.toContain(USER_KEY);
      expect([...server.stdout, ...server.stderr].join("\n")).not.toContain(USER_KEY);
      expect(sqliteFileBytes(store).some((bytes) => bytes.includes(USER_KEY))).toBe(false);
      expect(readFileSync(join(db.dir, "data", "secrets.key"), "utf8")).not.toContain(USER_KEY);

      const { stored } = (await store.connections.storedUserKeys()).find((k) => k.appId === appId)!;
      expect(sqliteFileBytes(store).some((bytes) => bytes.includes(stored))).toBe(true); // what the next check looks for is there
      await cli("connections", "revoke", "--app", appId, "--user", "payer");
      expect(await store.connections.userUpstreamKey(appId, "payer")).toBeNull();
      expect(sqliteFileBytes(store).some((bytes) => bytes.includes(stored))).toBe(false);
    } finally {
      await store.close();
    }
  });
});

describe("keys rotate-kek", () => {
  test("with the old key as SECRETS_KEY_PREVIOUS, re-seals every kind under SECRETS_KEY; again, nothing; then the new key alone serves", async () => {
    const rotated = tempDatabase();
    try {
      const { appId } = await cliCreateApp(rotated.databaseUrl, "rotating");
      expect((await runCli(rotated.databaseUrl, "webhook", "add", "--app", appId, "--url", "https://hooks.example/r")).code).toBe(0);
      const before = openOperatorStore(rotated.databaseUrl);
      await before.connections.approve(appId, "payer", 1e9, Date.now(), { source: "user", upstreamKey: USER_KEY });
      await before.close();

      const oldKey = readFileSync(join(rotated.dir, "data", "secrets.key"), "utf8").trim();
      const newKey = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64");
      const env = { DATABASE_URL: rotated.databaseUrl, SECRETS_KEY: newKey, SECRETS_KEY_PREVIOUS: oldKey };
      const newKeyId = resolveSecretBox(loadConfig({ SECRETS_KEY: newKey }), () => {}).current.id;

      // The new key alone does not open the store yet: refused, naming the way out.
      const early = await runCliWithEnv({ DATABASE_URL: rotated.databaseUrl, SECRETS_KEY: newKey }, "app", "list");
      expect(early.code).toBe(2);
      expect(early.stderr).toContain("SECRETS_KEY_PREVIOUS");
      expect(early.stderr).not.toContain(oldKey);

      const first = await runCliWithEnv(env, "keys", "rotate-kek");
      expect({ code: first.code, json: first.json }).toEqual({
        code: 0,
        json: [{ keyId: newKeyId, settings: 1, webhookSecrets: 1, userKeys: 1, fundingFlows: 0 }],
      });
      const again = await runCliWithEnv(env, "keys", "rotate-kek");
      expect(again.json).toEqual([{ keyId: newKeyId, settings: 0, webhookSecrets: 0, userKeys: 0, fundingFlows: 0 }]);
      expect(first.stdout + first.stderr + again.stdout).not.toContain(oldKey);

      const shown = await runCliWithEnv({ DATABASE_URL: rotated.databaseUrl, SECRETS_KEY: newKey }, "connections", "show", "--app", appId, "--user", "payer");
      expect(shown.code).toBe(0);
      const after = openOperatorStore(rotated.databaseUrl, { SECRETS_KEY: newKey });
      try {
        expect(await after.connections.userUpstreamKey(appId, "payer")).toBe(USER_KEY);
        for (const { stored } of [...(await after.webhooks.storedSecrets()), ...(await after.connections.storedUserKeys())]) {
          expect(SecretBox.keyIdOf(stored)).toBe(newKeyId);
        }
      } finally {
        await after.close();
      }
    } finally {
      rotated.cleanup();
    }
  });
});
