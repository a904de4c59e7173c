/**
 * The client library's types against the service they describe, so the two cannot drift:
 * its error codes against the Error schema of the openapi.json a real app serves, the
 * answers of sessions, status and usage field by field against their documented schemas,
 * and its webhook event types against the service's own list.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import {
  createServerClient,
  ERROR_CODES,
  type CreateSessionInput,
  WEBHOOK_EVENT_TYPES,
  type Period,
  type SessionToken,
  type UsagePage,
  type UpstreamCredit,
  type UsageRow,
  type UserStatus,
} from "../../packages/client/src/server";
import type { ConnectionStatus } from "../../packages/client/src/types";
import { WEBHOOK_EVENT_TYPES as SERVICE_EVENT_TYPES } from "../../src/store/webhooks";
import { makeTestApp } from "../helpers/test-app";
import { schemaShape, shapeOf } from "./shape";

let spec: Record<string, any>;

beforeAll(async () => {
  const res = await makeTestApp().call("/api/v1/openapi.json");
  expect(res.status).toBe(200);
  spec = (await res.json()) as Record<string, any>;
});

/** The documented JSON schema of an operation's 200 answer. */
function answerSchema(method: string, path: string): Record<string, any> {
  const schema = spec.paths[path]?.[method]?.responses?.["200"]?.content?.["application/json"]?.schema;
  if (!schema) throw new Error(`openapi.json documents no JSON 200 for ${method} ${path}`);
  return schema;
}

describe("@metered-proxy/client/server matches the served openapi.json", () => {
  test("ERROR_CODES is the Error schema's code enum: one class per code, no more, no less", () => {
    const documented: string[] = spec.components.schemas.Error.properties.error.properties.code.enum;
    expect<string[]>([...ERROR_CODES].sort()).toEqual([...documented].sort());
  });

  test("SessionToken is POST /sessions' answer", () => {
    const shape = shapeOf<SessionToken>()({ token: "string", expiresAt: "number" });
    expect(shape).toEqual(schemaShape(answerSchema("post", "/api/v1/sessions")));
  });

  test("ConnectionStatus (browser entry) is GET /connections' answer", () => {
    const shape = shapeOf<ConnectionStatus>()({
      connected: "boolean",
      limits: "object",
      usage: "object",
      remainingUsd: "number",
      period: "object",
      resetsAt: "string",
      fundingSource: "string",
      upstreamCredit: "object|null",
      appUserId: "string",
      fundingStatus: "string",
      connectedAt: "string|null",
      updatedAt: "string|null",
    });
    expect(shape).toEqual(schemaShape(answerSchema("get", "/api/v1/connections")));
  });

  test("UserStatus is GET /status' answer, nested objects included", () => {
    const schema = answerSchema("get", "/api/v1/status");
    const shape = shapeOf<UserStatus>()({
      connected: "boolean",
      limits: "object",
      usage: "object",
      remainingUsd: "number",
      period: "object",
      resetsAt: "string",
      fundingSource: "string",
      upstreamCredit: "object|null",
    });
    expect(shape).toEqual(schemaShape(schema));
    expect(shapeOf<UserStatus["limits"]>()({ monthlyUsd: "number" })).toEqual(schemaShape(schema.properties.limits));
    expect(shapeOf<UserStatus["usage"]>()({ monthlyUsd: "number" })).toEqual(schemaShape(schema.properties.usage));
    expect(shapeOf<Period>()({ start: "string", end: "string" })).toEqual(schemaShape(schema.properties.period));
    const credit = shapeOf<UpstreamCredit>()({ remainingUsd: "number|null", limitUsd: "number|null" });
    expect(credit).toEqual(schemaShape(schema.properties.upstreamCredit));
  });

  test("UsagePage and UsageRow are GET /usage's answer", () => {
    const schema = answerSchema("get", "/api/v1/usage");
    expect(shapeOf<UsagePage>()({ period: "string", data: "array", nextCursor: "string|null" })).toEqual(schemaShape(schema));
    const row = shapeOf<UsageRow>()({
      requestId: "string",
      model: "string",
      generationId: "string|null",
      promptTokens: "number",
      completionTokens: "number",
      costUsd: "number",
      source: "string",
      status: "string",
      streamed: "boolean",
      startedAt: "string",
      finishedAt: "string",
      reservedUsd: "number|null",
      overrunUsd: "number",
    });
    expect(row).toEqual(schemaShape(schema.properties.data.items));
    const source: UsageRow["source"][] = ["upstream", "computed", "generation", "reservation", "estimated"];
    expect(schema.properties.data.items.properties.source.enum).toEqual(source);
  });

  test("listUsage sends GET /usage's documented query parameters, and createSession POST /sessions' documented body", async () => {
    const sent: Array<{ url: URL; body: unknown }> = [];
    const client = createServerClient({
      baseUrl: "http://proxy.test",
      secretKey: "sk_live_test_key",
      fetch: async (input, init) => {
        sent.push({ url: new URL(String(input)), body: init?.body ? JSON.parse(String(init.body)) : null });
        return Response.json({});
      },
    });
    await client.listUsage("alice", { period: "2026-01", cursor: "c", limit: 10 });
    await client.createSession({ appUserId: "alice", requestLimit: { monthlyUsd: 5 } });
    const usage = spec.paths["/api/v1/usage"].get.parameters as Array<{ name: string; in: string }>;
    expect(sent[0]!.url.pathname).toBe("/api/v1/usage");
    expect([...sent[0]!.url.searchParams.keys()].sort()).toEqual(
      usage
        .filter((p) => p.in === "query")
        .map((p) => p.name)
        .sort(),
    );
    const sessionBody = spec.paths["/api/v1/sessions"].post.requestBody.content["application/json"].schema;
    expect(sent[1]!.url.pathname).toBe("/api/v1/sessions");
    expect(Object.keys(sent[1]!.body as object).sort()).toEqual(Object.keys(sessionBody.properties).sort());
    expect(Object.keys((sent[1]!.body as { requestLimit: object }).requestLimit)).toEqual(Object.keys(sessionBody.properties.requestLimit.properties));
    expect(sent[1]!.body).toEqual({ appUserId: "alice", requestLimit: { monthlyUsd: 5 } });
  });

  test("CreateSessionInput is POST /sessions' body, field for field (less the deprecated requestLimitUsd)", () => {
    const schema = spec.paths["/api/v1/sessions"].post.requestBody.content["application/json"].schema;
    const input = shapeOf<Omit<CreateSessionInput, "requestLimitUsd">>()({ appUserId: "string", requestLimit: "optional object" });
    expect(input).toEqual(schemaShape(schema));
    expect(shapeOf<NonNullable<CreateSessionInput["requestLimit"]>>()({ monthlyUsd: "number" })).toEqual(schemaShape(schema.properties.requestLimit));
  });

  test("the deprecated requestLimitUsd (0.1) is still sent as requestLimit; both at once are refused before anything is sent", async () => {
    const bodies: unknown[] = [];
    const client = createServerClient({
      baseUrl: "http://proxy.test",
      secretKey: "sk_live_test_key",
      fetch: async (_input, init) => {
        bodies.push(JSON.parse(String(init?.body)));
        return Response.json({});
      },
    });
    await client.createSession({ appUserId: "alice", requestLimitUsd: 3 });
    await client.createSession({ appUserId: "bob" });
    expect(bodies).toEqual([{ appUserId: "alice", requestLimit: { monthlyUsd: 3 } }, { appUserId: "bob" }]);
    await expect(client.createSession({ appUserId: "carol", requestLimit: { monthlyUsd: 3 }, requestLimitUsd: 3 })).rejects.toThrow(TypeError);
    expect(bodies).toHaveLength(2);
  });
});

test("WEBHOOK_EVENT_TYPES is the service's list of event types", () => {
  expect([...WEBHOOK_EVENT_TYPES].sort()).toEqual([...SERVICE_EVENT_TYPES].sort());
});
