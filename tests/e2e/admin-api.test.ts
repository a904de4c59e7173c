/**
 * The admin API on a real server process (the bundle, as `npm start` runs it, with ADMIN_TOKEN): an app it
 * creates is usable at once with its secret key, and its answers are the CLI's, byte for
 * byte where the CLI prints the same thing (the usage export), item for item for lists.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connectOverHttp, runCli, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { ADMIN_TOKEN } from "../helpers/admin";
import { pollUntil } from "../helpers/cluster";

const db = tempDatabase();
let server: RunningServer;
beforeAll(async () => {
  server = await startServer({ databaseUrl: db.databaseUrl, env: { ADMIN_TOKEN } });
});
afterAll(async () => {
  await server?.stop();
  db.cleanup();
});

const admin = (path: string, init: { method?: string; json?: unknown } = {}) =>
  server.fetch(`/api/v1/admin${path}`, {
    method: init.method ?? (init.json === undefined ? "GET" : "POST"),
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(init.json === undefined ? {} : { "content-type": "application/json" }) },
    body: init.json === undefined ? undefined : JSON.stringify(init.json),
  });

describe("admin API on a running server", () => {
  test("an app created over the admin API mints sessions, meters a chat, and exports what the CLI exports", async () => {
    const createdRes = await admin("/apps", { json: { name: "made over HTTP", origins: ["http://localhost:3000"] } });
    expect(createdRes.status).toBe(201);
    const created = (await createdRes.json()) as { appId: string; secretKey: string };

    // Its key works at once: a session, an approval, a metered call.
    const session = await server.fetch("/api/v1/sessions", {
      method: "POST",
      headers: { authorization: `Bearer ${created.secretKey}`, "content-type": "application/json" },
      body: JSON.stringify({ appUserId: "erin" }),
    });
    expect(session.status).toBe(200);
    expect(((await session.json()) as { token: string }).token.split(".")).toHaveLength(3);
    await connectOverHttp(server, created.secretKey, "erin", 3);
    const chat = await server.fetch("/api/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${created.secretKey}`, "content-type": "application/json", "x-service-user": "erin" },
      body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi [[mock tokens=3]]" }], max_tokens: 8 }),
    });
    expect(chat.status).toBe(200);
    const requestId = chat.headers.get("x-request-id")!;

    // The export sees the call at once (the server writes its queued rows first), and is the CLI's, byte for byte.
    const day = new Date().toISOString().slice(0, 10);
    for (const format of ["jsonl", "csv"]) {
      const exported = await admin(`/apps/${created.appId}/usage?from=${day}&to=${day}&format=${format}`);
      expect(exported.status).toBe(200);
      const body = await exported.text();
      expect(body).toContain(requestId);
      const cli = await runCli(db.databaseUrl, "usage", "export", "--app", created.appId, "--from", day, "--to", day, "--format", format);
      expect(cli.code).toBe(0);
      expect(body).toBe(cli.stdout);
    }

    // Lists: the API's items are the CLI's lines.
    const connections = (await (await admin(`/apps/${created.appId}/connections`)).json()) as { data: unknown[]; nextCursor: string | null };
    expect(connections.nextCursor).toBeNull();
    expect(connections.data).toEqual((await runCli(db.databaseUrl, "connections", "list", "--app", created.appId)).json);
    const listed = (await (await admin("/apps")).json()) as { data: unknown[] };
    expect(listed.data).toEqual((await runCli(db.databaseUrl, "app", "list")).json);
  });

  test("a change made over the admin API holds at once for the app's key; the token is never logged", async () => {
    const created = (await (await admin("/apps", { json: { name: "to disable" } })).json()) as { appId: string; secretKey: string };
    const status = () => server.fetch("/api/v1/status?appUserId=u", { headers: { authorization: `Bearer ${created.secretKey}` } });
    expect((await status()).status).toBe(200);
    expect((await admin(`/apps/${created.appId}/disable`, { method: "POST" })).status).toBe(200);
    const refused = await status();
    // Its holder is told why; a wrong secret for the same app is told nothing more than before.
    expect({ status: refused.status, body: await refused.json() }).toEqual({ status: 401, body: { error: { code: "auth", message: "this app is disabled" } } });
    const wrongKey = created.secretKey.slice(0, -1) + (created.secretKey.endsWith("A") ? "B" : "A");
    const guessed = await server.fetch("/api/v1/status?appUserId=u", { headers: { authorization: `Bearer ${wrongKey}` } });
    expect({ status: guessed.status, body: await guessed.json() }).toEqual({ status: 401, body: { error: { code: "auth", message: "invalid secret key" } } });
    expect((await admin(`/apps/${created.appId}/enable`, { method: "POST" })).status).toBe(200);
    expect((await status()).status).toBe(200);

    expect((await server.fetch("/api/v1/admin/apps", { headers: { authorization: `Bearer ${created.secretKey}` } })).status).toBe(401);
    // Written once each response is done: wait for the refused call's line, the last one.
    const lines = await pollUntil("the refused admin call's log line", async () => {
      const found = server.logLines().filter((l) => l.msg === "request" && String(l.route).startsWith("/api/v1/admin/"));
      return found.some((l) => l.status === 401) ? found : undefined;
    });
    expect(lines.length).toBeGreaterThan(5);
    expect([...server.stdout, ...server.stderr].filter((l) => l.includes(ADMIN_TOKEN))).toEqual([]);
  });
});
