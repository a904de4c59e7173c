/**
 * The published openapi.json says what the service does: every core endpoint with its
 * security scheme and error responses, every error response referring to the one Error
 * schema built from src/errors.ts, the chat stream, `servers`, and schemas that compile.
 * tests/openapi-conformance.test.ts checks real responses against it; tests/openapi-lint.test.ts
 * runs a real linter on it.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { ERROR_CODES } from "../src/errors";
import { makeTestApp } from "./helpers/test-app";
import { publishedDocument, type Json, type PublishedDocument } from "./helpers/openapi-validator";

const ERROR_REF = { $ref: "#/components/schemas/Error" };
/** Their 503 is their own status body, not an error envelope. */
const HEALTH_PATHS = ["/healthz", "/readyz"];

/** The core endpoints of issue 2: how each is secured, what it returns on success and error. */
const ENDPOINTS = [
  { method: "post", path: "/api/v1/sessions", security: "secretKey", success: 200, errors: [400, 401, 413, 429] },
  { method: "post", path: "/api/v1/connections", security: "sessionToken", success: 200, errors: [400, 401, 413] },
  { method: "get", path: "/api/v1/connections", security: "sessionToken", success: 200, errors: [401] },
  { method: "delete", path: "/api/v1/connections", security: "sessionToken", success: 204, errors: [401] },
  { method: "post", path: "/api/v1/connections/funding", security: "sessionToken", success: 201, errors: [400, 401, 413] },
  { method: "get", path: "/api/v1/status", security: "secretKey", success: 200, errors: [400, 401] },
  // Open to anyone; the operator's metrics token adds the counters (an optional scheme).
  { method: "get", path: "/healthz", security: "optional metricsToken", success: 200, errors: [503] },
  { method: "get", path: "/readyz", security: null, success: 200, errors: [503] },
] as const;

let doc: PublishedDocument;
let spec: Json;

beforeAll(async () => {
  const t = makeTestApp();
  doc = await publishedDocument(t.call);
  spec = doc.spec;
});

const operations = () => doc.operations();
const operation = (method: string, path: string) => doc.operation(method, path);

describe("openapi.json documents every core endpoint", () => {
  test("is OpenAPI 3.1 with both bearer security schemes", () => {
    expect(spec.openapi).toMatch(/^3\.1\./);
    expect(spec.components.securitySchemes).toMatchObject({
      secretKey: { type: "http", scheme: "bearer" },
      sessionToken: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
    });
  });

  for (const e of ENDPOINTS) {
    test(`${e.method.toUpperCase()} ${e.path}: security ${e.security ?? "none"}, ${e.success} and errors ${e.errors.join(", ")}`, () => {
      const op = operation(e.method, e.path);
      if (e.security?.startsWith("optional ")) expect(op.security).toEqual([{}, { [e.security.slice("optional ".length)]: [] }]);
      else if (e.security) expect(op.security).toEqual([{ [e.security]: [] }]);
      else expect(op.security ?? []).toEqual([]);
      expect(op.responses?.[String(e.success)]).toBeDefined();
      for (const status of e.errors) {
        const schema = op.responses?.[String(status)]?.content?.["application/json"]?.schema;
        expect({ status, schema }).toMatchObject({ status, schema: expect.any(Object) });
        // The one error envelope.
        if (!HEALTH_PATHS.includes(e.path)) expect({ status, schema }).toEqual({ status, schema: ERROR_REF });
      }
    });
  }

  test("every security requirement names a declared scheme", () => {
    const declared = Object.keys(spec.components.securitySchemes);
    for (const { path, method, op } of operations()) {
      for (const requirement of op.security ?? []) {
        for (const name of Object.keys(requirement)) expect({ path, method, name, known: declared.includes(name) }).toMatchObject({ known: true });
      }
    }
  });

  test("every documented response is well-formed: content is a media-type map with a schema", () => {
    const problems: string[] = [];
    for (const { path, method, op } of operations()) {
      for (const [status, response] of Object.entries<Json>(op.responses ?? {})) {
        if (typeof response.description !== "string") problems.push(`${method} ${path} ${status}: no description`);
        for (const [mediaType, media] of Object.entries<Json>(response.content ?? {})) {
          if (!/^[\w.+-]+\/[\w.+-]+$/.test(mediaType) || typeof media !== "object" || !media.schema) {
            problems.push(`${method} ${path} ${status}: content ${JSON.stringify({ [mediaType]: media })}`);
          }
        }
      }
    }
    expect(problems).toEqual([]);
  });

  test("every response schema compiles under strict JSON Schema 2020-12, references included", () => {
    const problems: string[] = [];
    for (const { path, method, op } of operations()) {
      for (const [status, response] of Object.entries<Json>(op.responses ?? {})) {
        const schema = response.content?.["application/json"]?.schema;
        if (!schema) continue;
        try {
          doc.compile(schema);
        } catch (err) {
          problems.push(`${method} ${path} ${status}: ${(err as Error).message}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  test("request bodies are documented with their JSON schema", () => {
    const sessions = operation("post", "/api/v1/sessions").requestBody?.content?.["application/json"]?.schema;
    expect(sessions?.properties).toHaveProperty("appUserId");
    expect(sessions?.properties).toHaveProperty("requestLimit");
    expect(sessions?.required).toEqual(["appUserId"]);
    const connections = operation("post", "/api/v1/connections").requestBody;
    expect(connections?.content?.["application/json"]?.schema?.properties).toHaveProperty("monthlyUsd");
    // The body may be left out: the token's requested limit or the current cap applies.
    expect(connections?.required).not.toBe(true);
  });

  test("GET /api/v1/status documents its required appUserId query parameter", () => {
    expect(operation("get", "/api/v1/status").parameters).toContainEqual(expect.objectContaining({ name: "appUserId", in: "query", required: true }));
  });
});

describe("openapi.json's shared parts: servers, the one Error schema, the event stream", () => {
  test("servers is set, relative to wherever the service is reached", () => {
    expect(spec.servers).toEqual([expect.objectContaining({ url: "/" })]);
  });

  test("components.schemas.Error has every code of src/errors.ts as an enum, the message and the budget fields", () => {
    const error = spec.components.schemas.Error;
    expect(error.required).toEqual(["error"]);
    const inner = error.properties.error;
    expect(inner.required).toEqual(["code", "message"]);
    expect(inner.properties.code).toMatchObject({ type: "string", enum: ERROR_CODES });
    expect(ERROR_CODES).toContain("budget_exceeded");
    expect(inner.properties.message).toMatchObject({ type: "string" });
    expect(inner.properties).toMatchObject({
      limitUsd: { type: "number" },
      usedUsd: { type: "number" },
      remainingUsd: { type: "number" },
      resetsAt: { type: "string", format: "date-time" },
    });
    expect(Object.keys(inner.properties).sort()).toEqual(["code", "limitUsd", "message", "remainingUsd", "resetsAt", "usedUsd"]);
  });

  test("every JSON error response of every operation refers to that one schema; no copy of the envelope anywhere else", () => {
    const copies: string[] = [];
    let references = 0;
    for (const { path, method, op } of operations()) {
      for (const [status, response] of Object.entries<Json>(op.responses ?? {})) {
        const schema = response.content?.["application/json"]?.schema;
        if (!schema) continue;
        if (Bun.deepEquals(schema, ERROR_REF)) {
          references++;
          expect({ path, status, description: response.description }).toMatchObject({ description: expect.stringContaining("`error.code`") });
        } else if (Number(status) >= 400 && !HEALTH_PATHS.includes(path)) copies.push(`${method} ${path} ${status}`);
        else if (JSON.stringify(schema).includes('"error"')) copies.push(`${method} ${path} ${status}: an inline envelope`);
      }
    }
    expect(copies).toEqual([]);
    expect(references).toBeGreaterThan(20);
  });

  test("every /api/v1 operation documents its client errors (4xx)", () => {
    // A fixed script with no input: nothing a client sends can be wrong.
    const STATIC = ["/api/v1/grants/popup.js"];
    const without = operations()
      .filter(({ path }) => path.startsWith("/api/v1/") && !STATIC.includes(path))
      .filter(({ op }) => !Object.keys(op.responses ?? {}).some((status) => status.startsWith("4")))
      .map(({ method, path }) => `${method} ${path}`);
    expect(without).toEqual([]);
  });

  test("POST /api/v1/chat/completions answers 200 as JSON or, with stream: true, as text/event-stream", () => {
    const ok = operation("post", "/api/v1/chat/completions").responses["200"];
    expect(Object.keys(ok.content).sort()).toEqual(["application/json", "text/event-stream"]);
    expect(ok.content["text/event-stream"].schema).toMatchObject({ type: "string", description: expect.stringContaining("[DONE]") });
  });
});
