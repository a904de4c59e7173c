/**
 * A streamed chat call's access line is written once the stream is metered, so it carries
 * the model and the cost, also when the stream is still running after its headers went
 * out (the line's hook must wait for the metering, not log at once). The stream here
 * pauses between chunks, so it is still open when the response's hooks run.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { cliCreateApp, connectOverHttp, startServer, tempDatabase, type RunningServer } from "../helpers/server";
import { pollUntil } from "../helpers/cluster";

let server: RunningServer;
const db = tempDatabase();
let secretKey = "";

beforeAll(async () => {
  ({ secretKey } = await cliCreateApp(db.databaseUrl, "logged streams"));
  server = await startServer({ databaseUrl: db.databaseUrl, env: { JWT_SECRET: "access-log-stream-jwt-secret-0123456789ab" } });
  await connectOverHttp(server, secretKey, "alice", 5);
});
afterAll(async () => {
  await server?.stop();
  db.cleanup();
});

test("a long stream's line waits for its metering: it has the model and the cost", async () => {
  const response = await server.fetch("/api/v1/chat/completions", {
    method: "POST",
    headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/json", "x-service-user": "alice" },
    body: JSON.stringify({
      model: "openai/gpt-4o-mini",
      messages: [{ role: "user", content: "hi [[mock tokens=6 pause_ms=80]]" }],
      max_tokens: 16,
      stream: true,
    }),
  });
  expect(response.status).toBe(200);
  const requestId = response.headers.get("x-request-id")!;
  expect(await response.text()).toContain("[DONE]");

  const line = await pollUntil("the stream's request line", async () => server.logLines().find((l) => l.msg === "request" && l.requestId === requestId));
  expect(line).toMatchObject({ status: 200, appUserId: "alice", model: "openai/gpt-4o-mini" });
  expect(line.costUsd as number).toBeGreaterThan(0);
});
