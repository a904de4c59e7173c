/**
 * First start in production on an empty store: the default app's secret key goes to a file
 * only the service's user can read (0600), and stdout (a log collector's input in
 * production) gets only the file's path, and the command that creates more apps.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { startMockUpstream, type RunningMockUpstream } from "../../src/upstream/mock";
import { startServer, tempDatabase } from "../helpers/server";

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
