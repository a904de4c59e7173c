/**
 * The access log of a real server over a scripted session: one `request` line per request
 * (200, 401, 402, 404, 429, 502; JSON and streamed chat), with its route, status, error
 * code, app, user, latency, and for chat calls the model and the cost; an incoming
 * x-request-id is kept; and no secret key, secret, session token or Authorization value
 * appears anywhere in the output.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { cliCreateApp, connectOverHttp, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { pollUntil } from "../helpers/cluster";

let server: RunningServer;
const db = tempDatabase();
let secretKey = "";
let appId = "";
let sessionToken = "";

beforeAll(async () => {
  ({ secretKey, appId } = await cliCreateApp(db.databaseUrl, "logged app"));
  server = await startServer({ databaseUrl: db.databaseUrl, env: { RL_CHAT_LIMIT: "3", JWT_SECRET: "access-log-jwt-secret-0123456789abcdefgh" } });
});
afterAll(async () => {
  await server?.stop();
  db.cleanup();
});

const chat = (user: string, content: string, stream = false, headers: Record<string, string> = {}) =>
  server.fetch("/api/v1/chat/completions", {
    method: "POST",
    headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/json", "x-service-user": user, ...headers },
    body: JSON.stringify({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content }], max_tokens: 16, stream }),
  });

test("one line per request, with what an operator needs and no secret", async () => {
  const sent: Array<{ requestId: string; status: number }> = [];
  const record = async (res: Response) => {
    await res.text();
    sent.push({ requestId: res.headers.get("x-request-id")!, status: res.status });
    return res;
  };
  await record(await server.fetch("/healthz"));
  const minted = await server.fetch("/api/v1/sessions", {
    method: "POST",
    headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/json" },
    body: JSON.stringify({ appUserId: "alice" }),
  });
  sessionToken = ((await minted.clone().json()) as { token: string }).token;
  await record(minted);
  await connectOverHttp(server, secretKey, "alice", 5); // two more requests, not recorded here
  await record(await server.fetch("/api/v1/status?appUserId=alice", { headers: { authorization: "Bearer sk_live_appnope_wrongsecretwrongsecret00" } }));
  const json = await record(await chat("alice", "hi [[mock tokens=3]]", false, { "x-request-id": "client-trace-42" }));
  expect(json.headers.get("x-client-request-id")).toBe("client-trace-42");
  expect(json.headers.get("x-request-id")).not.toBe("client-trace-42");
  await record(await chat("alice", "hi [[mock tokens=3]]", true));
  await record(await chat("alice", "fail [[mock status=500]]"));
  await record(await chat("bob", "not connected"));
  await record(await chat("alice", "over the limit"));
  await record(await server.fetch("/api/v1/nowhere"));

  const lines = await pollUntil("a request line for each request", async () => {
    const found = server.logLines().filter((l) => l.msg === "request");
    return sent.every((s) => found.some((l) => l.requestId === s.requestId)) ? found : undefined;
  });
  const byId = (id: string) => lines.filter((l) => l.requestId === id);
  for (const s of sent) {
    expect(byId(s.requestId)).toHaveLength(1);
    expect(byId(s.requestId)[0]).toMatchObject({ status: s.status, method: expect.any(String), route: expect.any(String), latencyMs: expect.any(Number) });
  }
  expect(sent.map((s) => s.status)).toEqual([200, 200, 401, 200, 200, 502, 402, 429, 404]);
  const [health, session, unauth, jsonCall, streamCall, failed, notConnected, limited, missing] = sent.map((s) => byId(s.requestId)[0]!);
  expect(health).toMatchObject({ route: "/healthz", method: "GET" });
  expect(session).toMatchObject({ route: "/api/v1/sessions", appId });
  expect(unauth).toMatchObject({ errorCode: "auth" });
  expect(jsonCall).toMatchObject({
    route: "/api/v1/chat/completions",
    appId,
    appUserId: "alice",
    clientRequestId: "client-trace-42",
    model: "openai/gpt-4o-mini",
  });
  expect(jsonCall!.costUsd as number).toBeGreaterThan(0);
  expect(streamCall).toMatchObject({ appUserId: "alice", model: "openai/gpt-4o-mini" });
  expect(streamCall!.costUsd as number).toBeGreaterThan(0);
  expect(failed).toMatchObject({ errorCode: "upstream", costUsd: 0 });
  expect(notConnected).toMatchObject({ errorCode: "not_connected", appUserId: "bob" });
  expect(limited).toMatchObject({ errorCode: "rate_limited" });
  expect(missing).toMatchObject({ errorCode: "not_found" });

  const output = [...server.stdout, ...server.stderr].join("\n");
  const secret = secretKey.split("_").pop()!;
  for (const forbidden of [secretKey, secret, sessionToken, "wrongsecretwrongsecret00", "Bearer"]) expect(output).not.toContain(forbidden);
});
