/**
 * Secrets at rest, end to end: real server processes (the bundle `npm start` runs), the
 * operator CLI, a SQLite file read byte by byte, and a webhook receiver in its own process.
 * A copy of the database file alone must not let anyone sign a session token or a webhook:
 * the secrets in it are sealed under a key kept beside it, and its files are the service
 * user's only. An older store (secrets in clear) is sealed at start and keeps working; a
 * start with another key fails plainly.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { loadConfig } from "../../src/config";
import { systemClock } from "../../src/clock";
import { SessionTokens } from "../../src/auth/session-token";
import { resolveSecretBox } from "../../src/secrets/secrets-key";
import { SecretBox, sealedContext } from "../../src/secrets/secret-box";
import { cliCreateApp, connectOverHttp, freePort, runCliWithEnv, runServerToExit, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { pollUntil } from "../helpers/cluster";
import { startReceiver, type ReceiverProcess } from "../helpers/webhook-receiver-process";

/** The receiver listens on this machine: private addresses are allowed for it (and only here). */
const LOCAL_RECEIVERS = { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true" };
const ENV = { WEBHOOK_POLL_MS: "50", ...LOCAL_RECEIVERS };
const modeOf = (path: string) => (statSync(path).mode & 0o777).toString(8);

/** A session token for `appId`/`appUserId` signed with `secret`, exactly as the service signs them, as if minted with the app's key in `dbPath`. */
async function tokenSignedWith(secret: string, dbPath: string, appId: string, appUserId: string): Promise<string> {
  const file = new Database(dbPath, { readonly: true });
  const keyId = file.query<{ id: string }, [string]>("SELECT id FROM app_keys WHERE app_id = ? AND revoked_at IS NULL").get(appId)!.id;
  file.close();
  return (await new SessionTokens(new TextEncoder().encode(secret), systemClock, 600).mint(appId, keyId, appUserId, null)).token;
}

/** GET /connections with a session token: 200 when the server accepts it, 401 when not. */
const connectionsStatus = async (server: RunningServer, token: string) =>
  (await server.fetch("/api/v1/connections", { headers: { authorization: `Bearer ${token}` } })).status;

/** The database's rows that hold secrets, read straight from the file. */
function secretRows(path: string): { jwt: string | null; webhooks: string[] } {
  const db = new Database(path, { readonly: true });
  try {
    const jwt = db.query<{ value: string }, []>("SELECT value FROM settings WHERE key = 'jwt_secret'").get()?.value ?? null;
    const webhooks = db
      .query<{ secret: string }, []>("SELECT secret FROM webhook_endpoints")
      .all()
      .map((r) => r.secret);
    return { jwt, webhooks };
  } finally {
    db.close();
  }
}

let receiver: ReceiverProcess;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.stop();
});

describe("a new store", () => {
  const db = tempDatabase();
  let server: RunningServer;
  let app: { appId: string; secretKey: string };
  let webhookSecret: string;
  let jwtSecret: string;
  /** The JWT secret's row as the server left it at start, before any CLI command opened the store. */
  let jwtRowAtStart: string | null;

  beforeAll(async () => {
    server = await startServer({ databaseUrl: db.databaseUrl, env: ENV });
    jwtRowAtStart = secretRows(db.path).jwt;
    app = await cliCreateApp(db.databaseUrl, "sealed");
    const added = await runCliWithEnv({ ...LOCAL_RECEIVERS, DATABASE_URL: db.databaseUrl }, "webhook", "add", "--app", app.appId, "--url", receiver.url);
    webhookSecret = added.json[0]!.secret as string;
    // What the server signs with, opened with the key file beside the database (as the server does).
    const box = resolveSecretBox(loadConfig({ DATABASE_URL: db.databaseUrl }), () => {});
    const row = secretRows(db.path).jwt!;
    // (Read as it is if it were in clear, so that each test below fails on its own then.)
    jwtSecret = SecretBox.isSealed(row) ? box.open(row, sealedContext.setting("jwt_secret")) : row;
  });
  afterAll(async () => {
    await server?.stop();
    db.cleanup();
  });

  test("its files are 0600 (the database, -wal, -shm, the ledger's per-user index and its own, the lock, the key file) in a 0700 folder", () => {
    const folder = dirname(db.path);
    expect(modeOf(folder)).toBe("700");
    const names = readdirSync(folder).sort();
    expect(names).toEqual([
      "proxy.sqlite",
      "proxy.sqlite-shm",
      "proxy.sqlite-user-index",
      "proxy.sqlite-user-index-shm",
      "proxy.sqlite-user-index-wal",
      "proxy.sqlite-wal",
      "proxy.sqlite.lock",
      "secrets.key",
    ]);
    for (const name of names) expect({ name, mode: modeOf(join(folder, name)) }).toEqual({ name, mode: "600" });
  });

  test("neither the JWT secret nor the webhook secret is in the database file or its -wal; their rows are sealed", async () => {
    expect(webhookSecret).toMatch(/^whsec_/);
    // The opened secret is the one in use: a token the server minted verifies with it.
    const session = await server.fetch("/api/v1/sessions", {
      method: "POST",
      headers: { authorization: `Bearer ${app.secretKey}`, "content-type": "application/json" },
      body: JSON.stringify({ appUserId: "alice" }),
    });
    const { token } = (await session.json()) as { token: string };
    expect(await new SessionTokens(new TextEncoder().encode(jwtSecret), systemClock, 600).verify(token)).toMatchObject({ appId: app.appId });

    const rows = secretRows(db.path);
    for (const value of [jwtRowAtStart!, rows.jwt!, ...rows.webhooks]) expect(value).toMatch(/^enc:v1:[A-Za-z0-9_-]{11}:[A-Za-z0-9_-]{16}:[A-Za-z0-9_-]+$/);
    expect(rows.webhooks).toHaveLength(1);
    const bytes = Buffer.concat([readFileSync(db.path), readFileSync(`${db.path}-wal`)]);
    expect(bytes.length).toBeGreaterThan(4096);
    for (const secret of [jwtSecret, webhookSecret, webhookSecret.slice("whsec_".length)]) expect(bytes.includes(Buffer.from(secret))).toBe(false);
  });

  test("a session token forged with anything the database file holds is refused; with the real secret it would pass", async () => {
    const rows = secretRows(db.path);
    const db2 = new Database(db.path, { readonly: true });
    const settings = db2.query<{ value: string }, []>("SELECT value FROM settings").all();
    db2.close();
    const candidates = [...new Set([rows.jwt!, ...rows.webhooks, ...settings.map((s) => s.value)])];
    expect(candidates.length).toBeGreaterThanOrEqual(3);
    for (const candidate of candidates) expect(await connectionsStatus(server, await tokenSignedWith(candidate, db.path, app.appId, "mallory"))).toBe(401);
    // The control: the same forgery with the secret (which only the key file opens) is accepted.
    expect(await connectionsStatus(server, await tokenSignedWith(jwtSecret, db.path, app.appId, "mallory"))).toBe(200);
  });

  test("a delivery is signed with the secret shown at creation", async () => {
    await receiver.control({ secret: webhookSecret });
    await connectOverHttp(server, app.secretKey, "bob", 5);
    await pollUntil("bob's approval, verified", async () =>
      (await receiver.received()).find((r) => r.verified && r.status === 204 && r.event?.data.userId === "bob"),
    );
  });
});

describe("a store an older version left, with its secrets in clear", () => {
  const db = tempDatabase();
  const folder = dirname(db.path);
  const OLD_JWT_SECRET = "old-plaintext-jwt-secret-0123456789abcdefghijklmnopqrstuv";
  const OLD_WEBHOOK_SECRET = `whsec_${randomBytes(32).toString("base64")}`;
  let app: { appId: string; secretKey: string };
  let server: RunningServer | undefined;
  let tokenMintedBefore: string;

  beforeAll(async () => {
    // The schema as this version creates it, then the secrets, the modes and the missing key
    // file as an older version left them.
    app = await cliCreateApp(db.databaseUrl, "old");
    const endpointId = (await runCliWithEnv({ ...LOCAL_RECEIVERS, DATABASE_URL: db.databaseUrl }, "webhook", "add", "--app", app.appId, "--url", receiver.url))
      .json[0]!.endpointId as string;
    const old = new Database(db.path);
    old.query("DELETE FROM settings WHERE key = 'secrets_key_check'").run();
    old.query("INSERT INTO settings (key, value) VALUES ('jwt_secret', ?)").run(OLD_JWT_SECRET);
    old.query("UPDATE webhook_endpoints SET secret = ? WHERE id = ?").run(OLD_WEBHOOK_SECRET, endpointId);
    old.close();
    rmSync(join(folder, "secrets.key"));
    for (const name of readdirSync(folder)) chmodSync(join(folder, name), 0o644);
    chmodSync(folder, 0o755);
    tokenMintedBefore = await tokenSignedWith(OLD_JWT_SECRET, db.path, app.appId, "carol");
  });
  afterAll(async () => {
    await server?.stop();
    db.cleanup();
  });

  test("is sealed at start and keeps working: sessions minted before verify, deliveries verify with the original secret", async () => {
    expect(secretRows(db.path)).toEqual({ jwt: OLD_JWT_SECRET, webhooks: [OLD_WEBHOOK_SECRET] });
    const inClear = [OLD_JWT_SECRET, OLD_WEBHOOK_SECRET].map((secret) => Buffer.from(secret));
    for (const secret of inClear) expect(readFileSync(db.path).includes(secret)).toBe(true);
    server = await startServer({ databaseUrl: db.databaseUrl, env: ENV });
    // Sealed in place, and the values in clear are gone from the files, not left in free space or the WAL.
    const files = [db.path, `${db.path}-wal`].filter(existsSync).map((path) => readFileSync(path));
    for (const secret of inClear) expect(files.some((bytes) => bytes.includes(secret))).toBe(false);

    const rows = secretRows(db.path);
    for (const value of [rows.jwt!, ...rows.webhooks]) expect(value).toStartWith("enc:v1:");
    expect(modeOf(folder)).toBe("700");
    for (const name of readdirSync(folder)) expect({ name, mode: modeOf(join(folder, name)) }).toEqual({ name, mode: "600" });

    expect(await connectionsStatus(server, tokenMintedBefore)).toBe(200);
    await receiver.control({ secret: OLD_WEBHOOK_SECRET });
    const approved = await server.fetch("/api/v1/connections", {
      method: "POST",
      headers: { authorization: `Bearer ${tokenMintedBefore}`, "content-type": "application/json" },
      body: JSON.stringify({ monthlyUsd: 3 }),
    });
    expect(approved.status).toBe(200);
    await pollUntil("carol's approval, verified with the original secret", async () =>
      (await receiver.received()).find((r) => r.verified && r.status === 204 && r.event?.data.userId === "carol"),
    );
    expect(await server.stop()).toBe(0);
    server = undefined;
  });

  test("another key: the server and the CLI stop with exit 2 and a plain message naming SECRETS_KEY", async () => {
    const wrongKey = randomBytes(32).toString("base64");
    const started = await runServerToExit({ DATABASE_URL: db.databaseUrl, SECRETS_KEY: wrongKey, PORT: String(freePort()) });
    expect(started.code).toBe(2);
    expect(started.stderr).toContain("SECRETS_KEY: the key in use");
    expect(started.stderr).toContain("does not open the secrets kept in this store");
    expect(started.stderr).not.toContain(wrongKey);
    expect(started.stderr).not.toMatch(/\n\s+at /); // a message, not a stack trace

    const cli = await runCliWithEnv({ DATABASE_URL: db.databaseUrl, SECRETS_KEY: wrongKey }, "app", "list");
    expect(cli.code).toBe(2);
    expect(cli.stderr).toContain("SECRETS_KEY: the key in use");
  });

  test("after a lost key, `secrets reset --confirm` drops what it sealed; the service starts, sessions in flight end", async () => {
    const newKey = randomBytes(32).toString("base64");
    const env = { DATABASE_URL: db.databaseUrl, SECRETS_KEY: newKey };
    expect((await runCliWithEnv(env, "secrets", "reset")).code).toBe(2);
    const reset = await runCliWithEnv(env, "secrets", "reset", "--confirm");
    expect(reset.code).toBe(0);
    expect(reset.json).toEqual([
      { jwtSecret: true, webhookEndpoints: [expect.objectContaining({ appId: app.appId, url: receiver.url, events: "all" })], userKeys: [], fundingFlows: 0 },
    ]);
    server = await startServer({ databaseUrl: db.databaseUrl, env: { ...ENV, SECRETS_KEY: newKey } });
    expect(await connectionsStatus(server, tokenMintedBefore)).toBe(401);
    expect((await runCliWithEnv(env, "webhook", "list", "--app", app.appId)).json).toEqual([]);
    expect(existsSync(join(folder, "secrets.key"))).toBe(true); // the old key file, no longer used while SECRETS_KEY is set
  });
});
