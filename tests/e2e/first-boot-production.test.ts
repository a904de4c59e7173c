/**
 * First start in production on an empty store: the default app's secret key goes to a file
 * only the service's user can read (0600), and stdout (a log collector's input in
 * production) gets only the file's path, and the command that creates more apps. A key file
 * an earlier store left there stops the start in one line, before any app is created.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Database } from "bun:sqlite";
import { startMockUpstream, type RunningMockUpstream } from "../../packages/mock-upstream/src";
import { freePort, runServerToExit, startServer, tempDatabase } from "../helpers/server";

const db = tempDatabase();
let upstream: RunningMockUpstream;
beforeAll(async () => {
  upstream = await startMockUpstream({ recordServed: false });
});
afterAll(async () => {
  await upstream?.stop();
  db.cleanup();
});

test("the key is written to a 0600 file beside the database, never printed", async () => {
  const env = {
    NODE_ENV: "production",
    UPSTREAM_API_KEY: "sk-or-prod-test",
    UPSTREAM_BASE_URL: upstream.url,
    JWT_SECRET: "first-boot-jwt-secret-0123456789abcdefgh",
  };
  const server = await startServer({ databaseUrl: db.databaseUrl, env });
  const keyFile = join(dirname(db.path), "default-app-key.json");
  try {
    expect(existsSync(keyFile)).toBe(true);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    const { appId, secretKey } = JSON.parse(readFileSync(keyFile, "utf8")) as { appId: string; secretKey: string };
    expect(secretKey.startsWith(`sk_live_${appId}_`)).toBe(true);
    const output = [...server.stdout, ...server.stderr].join("\n");
    expect(output).toContain(keyFile);
    // Started from the checkout (the bundle, as `npm start` runs it): the README's command.
    expect(output).toContain("Create more with: npm run cli -- app create --name NAME --origin https://your.site");
    expect(output).not.toContain(secretKey.split("_").pop()!);
    expect(output).not.toContain("sk_live_");
    const status = await server.fetch("/api/v1/status?appUserId=u", { headers: { authorization: `Bearer ${secretKey}` } });
    expect(status.status).toBe(200);
  } finally {
    expect(await server.stop()).toBe(0);
  }
  // A second start finds the app: no new key, and the file is left as it was.
  const before = readFileSync(keyFile, "utf8");
  const again = await startServer({ databaseUrl: db.databaseUrl, env });
  expect(await again.stop()).toBe(0);
  expect(readFileSync(keyFile, "utf8")).toBe(before);
  expect(again.stdout.join("\n")).not.toContain("default-app-key.json");
});

test("a key file an earlier store left: one plain line, exit 1, and no app created, so the next start makes one", async () => {
  const scratch = tempDatabase();
  const env = {
    NODE_ENV: "production",
    UPSTREAM_API_KEY: "sk-or-prod-test",
    UPSTREAM_BASE_URL: upstream.url,
    JWT_SECRET: "first-boot-jwt-secret-0123456789abcdefgh",
  };
  try {
    const keyFile = join(dirname(scratch.path), "default-app-key.json");
    mkdirSync(dirname(keyFile), { recursive: true });
    const earlier = '{"appId":"appearlier","keyId":"key1","secretKey":"sk_live_appearlier_x"}\n';
    writeFileSync(keyFile, earlier);
    const refused = await runServerToExit({ ...env, DATABASE_URL: scratch.databaseUrl, PORT: String(freePort()) });
    expect(refused.code).toBe(1);
    expect(refused.stderr.trimEnd().split("\n")).toEqual([
      `cannot start: the default app's key file ${keyFile} already exists, from an earlier store, and this store is empty. ` +
        "Move the file away (keep it if that store's app still matters), or set DEFAULT_APP_KEY_FILE to another path.",
    ]);
    expect(readFileSync(keyFile, "utf8")).toBe(earlier);
    const store = new Database(scratch.path, { readonly: true });
    try {
      expect(store.query<{ n: number }, []>("SELECT count(*) AS n FROM apps").get()!.n).toBe(0);
    } finally {
      store.close();
    }

    renameSync(keyFile, `${keyFile}.earlier`);
    const server = await startServer({ databaseUrl: scratch.databaseUrl, env });
    expect(await server.stop()).toBe(0);
    expect((JSON.parse(readFileSync(keyFile, "utf8")) as { secretKey: string }).secretKey).toStartWith("sk_live_");
  } finally {
    scratch.cleanup();
  }
});
