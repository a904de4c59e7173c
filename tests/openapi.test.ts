/**
 * The published openapi.json matches what the endpoints really return: every core endpoint
 * is documented with its security scheme and error responses, the document is well-formed,
 * and real responses (success and error) validate against its response schemas with ajv.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import Ajv2020, { type ValidateFunction } from "ajv/dist/2020";
import { makeTestApp, mintSession, type TestApp } from "./helpers/test-app";
import { makeAdminTestApp } from "./helpers/admin";
import { expectOk } from "./helpers/expect";
import { approveConsentOrThrow } from "./helpers/grants";

type Json = Record<string, any>;
const METHODS = ["get", "post", "put", "patch", "delete", "head", "options", "trace"];

/** The core endpoints of issue 2: how each is secured, what it returns on success and error. */
const ENDPOINTS = [
  { method: "post", path: "/api/v1/sessions", security: "secretKey", success: 200, errors: [400, 401, 413, 429] },
  { method: "post", path: "/api/v1/connections", security: "sessionToken", success: 200, errors: [400, 401, 413] },
  { method: "get", path: "/api/v1/connections", security: "sessionToken", success: 200, errors: [401] },
  { method: "delete", path: "/api/v1/connections", security: "sessionToken", success: 204, errors: [401] },
  { method: "get", path: "/api/v1/status", security: "secretKey", success: 200, errors: [400, 401] },
  { method: "get", path: "/healthz", security: null, success: 200, errors: [503] },
  { method: "get", path: "/readyz", security: null, success: 200, errors: [503] },
] as const;

let t: TestApp;
let spec: Json;
let ajv: Ajv2020;

beforeAll(async () => {
  t = makeTestApp({ env: { MAX_MONTHLY_USD: "100", MAX_BODY_BYTES: "4096" } });
  const res = await t.call("/api/v1/openapi.json");
  expect(res.status).toBe(200);
  spec = (await res.json()) as Json;
  // OpenAPI 3.1 schemas are JSON Schema 2020-12. Strict mode refuses unknown formats and
  // keywords, so a schema that promises something ajv cannot check fails here.
  ajv = new Ajv2020({ strict: true, allErrors: true });
  ajv.addFormat("date-time", {
    type: "string",
    validate: (s: string) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(s) && !Number.isNaN(Date.parse(s)),
  });
});

function operation(method: string, path: string): Json {
  const op = spec.paths?.[path]?.[method];
  if (!op) throw new Error(`${method.toUpperCase()} ${path} is not in openapi.json`);
  return op as Json;
}

const validators = new Map<string, ValidateFunction>();
function responseValidator(method: string, path: string, status: number): ValidateFunction {
  const key = `${method} ${path} ${status}`;
  let validate = validators.get(key);
  if (!validate) {
    const documented = operation(method, path).responses?.[String(status)];
    if (!documented) throw new Error(`${key}: status ${status} is not documented`);
    const schema = documented.content?.["application/json"]?.schema;
    if (!schema) throw new Error(`${key}: no application/json schema`);
    validate = ajv.compile(schema);
    validators.set(key, validate);
  }
  return validate;
}

/** Validates a real response against the document; returns ajv's errors (empty when it conforms). */
async function conformance(method: string, path: string, res: Response): Promise<unknown[]> {
  if (res.status === 204) {
    const documented = operation(method, path).responses?.["204"];
    expect(documented).toBeDefined();
    expect(documented.content).toBeUndefined();
    expect(await res.text()).toBe("");
    return [];
  }
  expect(res.headers.get("content-type") ?? "").toContain("application/json");
  const validate = responseValidator(method, path, res.status);
  return validate(await res.json()) ? [] : (validate.errors ?? [{ message: "invalid" }]);
}

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
      if (e.security) expect(op.security).toEqual([{ [e.security]: [] }]);
      else expect(op.security ?? []).toEqual([]);
      expect(op.responses?.[String(e.success)]).toBeDefined();
      for (const status of e.errors) {
        const schema = op.responses?.[String(status)]?.content?.["application/json"]?.schema;
        expect({ status, schema }).toMatchObject({ status, schema: expect.any(Object) });
        if (status >= 400 && e.path !== "/healthz" && e.path !== "/readyz") {
          // The one error envelope.
          expect(schema.required).toEqual(["error"]);
          expect(schema.properties.error.required).toEqual(expect.arrayContaining(["code", "message"]));
        }
      }
    });
  }

  test("every security requirement names a declared scheme", () => {
    const declared = Object.keys(spec.components.securitySchemes);
    for (const [path, item] of Object.entries<Json>(spec.paths)) {
      for (const method of METHODS.filter((m) => item[m])) {
        for (const requirement of item[method].security ?? []) {
          for (const name of Object.keys(requirement)) expect({ path, method, name, known: declared.includes(name) }).toMatchObject({ known: true });
        }
      }
    }
  });

  test("every documented response is well-formed: content is a media-type map with a schema", () => {
    const problems: string[] = [];
    for (const [path, item] of Object.entries<Json>(spec.paths)) {
      for (const method of METHODS.filter((m) => item[m])) {
        for (const [status, response] of Object.entries<Json>(item[method].responses ?? {})) {
          if (typeof response.description !== "string") problems.push(`${method} ${path} ${status}: no description`);
          for (const [mediaType, media] of Object.entries<Json>(response.content ?? {})) {
            if (!/^[\w.+-]+\/[\w.+-]+$/.test(mediaType) || typeof media !== "object" || !media.schema) {
              problems.push(`${method} ${path} ${status}: content ${JSON.stringify({ [mediaType]: media })}`);
            }
          }
        }
      }
    }
    expect(problems).toEqual([]);
  });

  test("every response schema compiles under strict JSON Schema 2020-12", () => {
    const problems: string[] = [];
    for (const [path, item] of Object.entries<Json>(spec.paths)) {
      for (const method of METHODS.filter((m) => item[m])) {
        for (const [status, response] of Object.entries<Json>(item[method].responses ?? {})) {
          const schema = response.content?.["application/json"]?.schema;
          if (!schema) continue;
          try {
            ajv.compile(schema);
          } catch (err) {
            problems.push(`${method} ${path} ${status}: ${(err as Error).message}`);
          }
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

describe("real responses validate against openapi.json", () => {
  test("POST /api/v1/sessions: 200, 400, 401, 413, 429", async () => {
    const a = await t.createClientApp();
    const p = "/api/v1/sessions";
    const calls = [
      t.call(p, { bearer: a.secretKey, json: { appUserId: "u", requestLimit: { monthlyUsd: 5 } } }),
      t.call(p, { bearer: a.secretKey, json: { appUserId: "u" } }),
      t.call(p, { bearer: a.secretKey, json: { appUserId: 5 } }),
      t.call(p, { bearer: a.secretKey, json: { appUserId: "u", requestLimit: { monthlyUsd: 1_000 } } }),
      t.call(p, { bearer: a.secretKey, json: "{" }),
      t.call(p, { json: { appUserId: "u" } }),
      t.call(p, { bearer: a.secretKey, json: {}, headers: { "content-length": "5000" } }),
    ];
    const statuses: number[] = [];
    for (const res of await Promise.all(calls)) {
      statuses.push(res.status);
      expect({ status: res.status, errors: await conformance("post", p, res) }).toEqual({ status: res.status, errors: [] });
    }
    expect(statuses).toEqual([200, 200, 400, 400, 400, 401, 413]);

    const limitedApp = makeTestApp({ env: { RL_SESSIONS_LIMIT: "1" } });
    const c = await limitedApp.createClientApp();
    expect((await limitedApp.call(p, { bearer: c.secretKey, json: { appUserId: "u" } })).status).toBe(200);
    const limited = await limitedApp.call(p, { bearer: c.secretKey, json: { appUserId: "u" } });
    expect({ status: limited.status, errors: await conformance("post", p, limited) }).toEqual({ status: 429, errors: [] });
  });

  test("POST, GET and DELETE /api/v1/connections: 200 (connected and not), 204, 400, 401, 413", async () => {
    const a = await t.createClientApp();
    const p = "/api/v1/connections";
    const token = await mintSession(t, a.secretKey, "conformance-user", 10);
    const run = async (method: string, init: Parameters<TestApp["call"]>[1], expected: number) => {
      const res = await t.call(p, { ...init, method: method.toUpperCase() });
      expect({ method, status: res.status, errors: await conformance(method, p, res) }).toEqual({ method, status: expected, errors: [] });
    };
    await run("get", { bearer: token }, 200); // not connected: null timestamps
    await run("post", { bearer: token, json: { monthlyUsd: 4 } }, 200);
    await run("get", { bearer: token }, 200); // connected
    await run("post", { bearer: token, json: { monthlyUsd: 0 } }, 400);
    await run("post", { bearer: token, json: { monthlyUsd: 11 } }, 400);
    await run("post", { bearer: token, json: "[]" }, 400);
    await run("post", { json: { monthlyUsd: 1 } }, 401);
    await run("post", { bearer: token, json: { monthlyUsd: 1 }, headers: { "content-length": "5000" } }, 413);
    await run("get", { bearer: a.secretKey }, 401);
    await run("delete", { bearer: token }, 204);
    await run("delete", { bearer: token }, 204);
    await run("delete", { bearer: "nope" }, 401);
  });

  test("GET /api/v1/status: 200 (connected and not), 400, 401", async () => {
    const a = await t.createClientApp();
    const token = await mintSession(t, a.secretKey, "s", 3);
    await t.call("/api/v1/connections", { method: "POST", bearer: token });
    const cases: Array<[string, Record<string, string>, number]> = [
      ["/api/v1/status?appUserId=s", { authorization: `Bearer ${a.secretKey}` }, 200],
      ["/api/v1/status?appUserId=never", { authorization: `Bearer ${a.secretKey}` }, 200],
      ["/api/v1/status", { authorization: `Bearer ${a.secretKey}` }, 400],
      ["/api/v1/status?appUserId=s", { authorization: `Bearer ${token}` }, 401],
      ["/api/v1/status?appUserId=s", {}, 401],
    ];
    for (const [url, headers, expected] of cases) {
      const res = await t.call(url, { headers });
      expect({ url, status: res.status, errors: await conformance("get", "/api/v1/status", res) }).toEqual({ url, status: expected, errors: [] });
    }
  });

  test("GET /healthz: 200 and 503", async () => {
    expect(await conformance("get", "/healthz", await t.call("/healthz"))).toEqual([]);
    const down = makeTestApp();
    await down.deps.store.close();
    const res = await down.call("/healthz");
    expect(res.status).toBe(503);
    expect(await conformance("get", "/healthz", res)).toEqual([]);
  });

  test("the validator is not vacuous: a wrong body fails against the same schemas", () => {
    expect(responseValidator("get", "/api/v1/status", 200)({ connected: "yes" })).toBe(false);
    expect(responseValidator("post", "/api/v1/sessions", 200)({ token: "x", expiresAt: "1700000000" })).toBe(false);
    expect(responseValidator("get", "/api/v1/connections", 401)({ message: "no" })).toBe(false);
    expect(responseValidator("get", "/api/v1/connections", 200)({})).toBe(false);
  });
});

describe("the admin API in openapi.json", () => {
  const adminOperations = () =>
    Object.entries<Json>(spec.paths)
      .filter(([path]) => path.startsWith("/api/v1/admin/"))
      .flatMap(([path, item]) => METHODS.filter((m) => item[m]).map((method) => ({ path, method, op: item[method] as Json })));

  test("every admin operation: the adminToken scheme, the admin tag, and 401, 404 and 429 as the error envelope", () => {
    expect(spec.components.securitySchemes.adminToken).toMatchObject({ type: "http", scheme: "bearer" });
    const operations = adminOperations();
    expect(operations.map((o) => `${o.method} ${o.path}`).sort()).toEqual(
      [
        "post /apps", "get /apps", "get /apps/{appId}", "patch /apps/{appId}", "post /apps/{appId}/disable", "post /apps/{appId}/enable",
        "get /apps/{appId}/keys", "post /apps/{appId}/keys", "delete /apps/{appId}/keys/{keyId}",
        "get /apps/{appId}/connections", "get /apps/{appId}/connections/{appUserId}", "delete /apps/{appId}/connections/{appUserId}",
        "get /apps/{appId}/grants", "delete /apps/{appId}/grants/{grantId}", "get /apps/{appId}/usage",
        "post /apps/{appId}/webhooks", "get /apps/{appId}/webhooks", "get /apps/{appId}/webhooks/deliveries",
        "post /apps/{appId}/webhooks/{endpointId}/disable", "post /apps/{appId}/webhooks/{endpointId}/enable", "delete /apps/{appId}/webhooks/{endpointId}",
      ].map((o) => o.replace(" /", " /api/v1/admin/")).sort(),
    );
    for (const { path, method, op } of operations) {
      expect({ path, method, security: op.security, tags: op.tags }).toEqual({ path, method, security: [{ adminToken: [] }], tags: ["admin"] });
      for (const status of ["401", "404", "429"]) {
        expect({ path, method, status, required: op.responses?.[status]?.content?.["application/json"]?.schema?.required }).toEqual({ path, method, status, required: ["error"] });
      }
    }
    // No app route takes the admin token, and no admin route an app credential.
    for (const [path, item] of Object.entries<Json>(spec.paths).filter(([p]) => !p.startsWith("/api/v1/admin/"))) {
      for (const method of METHODS.filter((m) => item[m])) expect(JSON.stringify(item[method].security ?? [])).not.toContain("adminToken");
    }
  });

  test("create and update document their JSON bodies", () => {
    const create = operation("post", "/api/v1/admin/apps").requestBody;
    expect(create?.required).toBe(true);
    expect(create?.content?.["application/json"]?.schema?.required).toEqual(["name"]);
    const update = operation("patch", "/api/v1/admin/apps/{appId}").requestBody?.content?.["application/json"]?.schema;
    expect(Object.keys(update?.properties ?? {}).sort()).toEqual(["grantDailyCeilingUsd", "maxGrantUsd", "name", "origins"]);
    const webhook = operation("post", "/api/v1/admin/apps/{appId}/webhooks").requestBody?.content?.["application/json"]?.schema;
    expect(webhook?.required).toEqual(["url"]);
  });

  test("real admin responses, success and error, validate against the document", async () => {
    const a = makeAdminTestApp({ env: { MAX_BODY_BYTES: "4096", RL_ADMIN_AUTH_LIMIT: "1" } });
    const checked: string[] = [];
    const check = async (method: string, template: string, path: string, init: Parameters<typeof a.admin>[1], expected: number) => {
      const res = await a.admin(path, { ...init, method: method.toUpperCase() });
      const where = `${method} ${path} → ${expected}`;
      expect({ where, status: res.status, errors: await conformance(method, `/api/v1/admin${template}`, res) }).toEqual({ where, status: expected, errors: [] });
      checked.push(`${method} ${template} ${expected}`);
    };
    const created = await expectOk(await a.admin("/apps", { json: { name: "documented", origins: ["https://d.example"] } }), 201);
    const id = created.appId as string;
    await a.deps.store.connections.approve(id, "u1", 2e9, a.clock.now());
    const consent = await a.deps.store.grants.createConsentRequest({ appId: id, usdCapNano: 1e9, maxUses: null, ttlSeconds: 600, origin: "https://d.example", state: "" }, a.clock.now(), 60_000);
    const grantId = (await approveConsentOrThrow(a.deps.store.grants, consent, a.clock.now())).grant.id;

    await check("post", "/apps", "/apps", { json: { name: "with grant", maxGrantUsd: 1 } }, 201);
    await check("post", "/apps", "/apps", { json: { name: "x", origins: ["bad"] } }, 400);
    await check("post", "/apps", "/apps", { json: { name: "x".repeat(5000) } }, 413);
    await check("get", "/apps", "/apps", {}, 200);
    await check("get", "/apps/{appId}", `/apps/${id}`, {}, 200);
    await check("get", "/apps/{appId}", "/apps/appnope", {}, 404);
    await check("patch", "/apps/{appId}", `/apps/${id}`, { json: { maxGrantUsd: null } }, 200);
    await check("patch", "/apps/{appId}", `/apps/${id}`, { json: {} }, 400);
    await check("post", "/apps/{appId}/disable", `/apps/${id}/disable`, {}, 200);
    await check("post", "/apps/{appId}/enable", `/apps/${id}/enable`, {}, 200);
    await check("get", "/apps/{appId}/keys", `/apps/${id}/keys`, {}, 200);
    await check("post", "/apps/{appId}/keys", `/apps/${id}/keys`, {}, 201);
    await check("delete", "/apps/{appId}/keys/{keyId}", `/apps/${id}/keys/${created.keyId}`, {}, 200);
    await check("delete", "/apps/{appId}/keys/{keyId}", `/apps/${id}/keys/${created.keyId}`, {}, 404);
    await check("get", "/apps/{appId}/connections", `/apps/${id}/connections?limit=1`, {}, 200);
    await check("get", "/apps/{appId}/connections", `/apps/${id}/connections?cursor=x`, {}, 400);
    await check("get", "/apps/{appId}/connections/{appUserId}", `/apps/${id}/connections/u1`, {}, 200);
    await check("delete", "/apps/{appId}/connections/{appUserId}", `/apps/${id}/connections/u1`, {}, 200);
    await check("get", "/apps/{appId}/grants", `/apps/${id}/grants`, {}, 200);
    await check("delete", "/apps/{appId}/grants/{grantId}", `/apps/${id}/grants/${grantId}`, {}, 200);
    await check("get", "/apps/{appId}/usage", `/apps/${id}/usage?from=2026-01-01&to=2026-01-01&format=xml`, {}, 400);
    await check("get", "/apps/{appId}/usage", `/apps/appnope/usage?from=2026-01-01&to=2026-01-01`, {}, 404);
    const hook = await expectOk(await a.admin(`/apps/${id}/webhooks`, { json: { url: "https://d.example/hooks", events: ["connection.revoked"] } }), 201);
    await a.deps.store.connections.revoke(id, "u1", a.clock.now());
    await check("post", "/apps/{appId}/webhooks", `/apps/${id}/webhooks`, { json: { url: "https://d.example/all" } }, 201);
    await check("post", "/apps/{appId}/webhooks", `/apps/${id}/webhooks`, { json: { url: "http://d.example/clear" } }, 400);
    await check("get", "/apps/{appId}/webhooks", `/apps/${id}/webhooks`, {}, 200);
    // The signing secret is shown by the registration only.
    expect(hook.secret).toMatch(/^whsec_/);
    expect(await (await a.admin(`/apps/${id}/webhooks`)).text()).not.toContain(hook.secret);
    await check("get", "/apps/{appId}/webhooks/deliveries", `/apps/${id}/webhooks/deliveries?limit=5`, {}, 200);
    await check("post", "/apps/{appId}/webhooks/{endpointId}/disable", `/apps/${id}/webhooks/${hook.endpointId}/disable`, {}, 200);
    await check("post", "/apps/{appId}/webhooks/{endpointId}/enable", `/apps/${id}/webhooks/${hook.endpointId}/enable`, {}, 200);
    await check("delete", "/apps/{appId}/webhooks/{endpointId}", `/apps/${id}/webhooks/${hook.endpointId}`, {}, 200);
    await check("delete", "/apps/{appId}/webhooks/{endpointId}", `/apps/${id}/webhooks/${hook.endpointId}`, {}, 404);
    await check("get", "/apps", "/apps", { bearer: "wrong" }, 401);
    await check("get", "/apps", "/apps", { bearer: "wrong" }, 429);
    expect(checked.length).toBe(32);
  });

  test("the usage export's lines validate against its documented row schema", async () => {
    const a = makeAdminTestApp();
    const app = await a.createClientApp();
    const at = a.clock.now();
    await a.deps.store.usageLedger.insertBatch([
      { requestId: "r1", account: `u/${app.appId}/2026-01/u`, appId: app.appId, appUserId: "u", grantId: null, period: "2026-01", model: "m", generationId: "g", promptTokens: 1, completionTokens: 2, costNano: 3, source: "computed", status: "ok", streamed: true, startedAt: at, finishedAt: at, reservedNano: 5, overrunNano: 0 },
      { requestId: "r2", account: "g/grt1", appId: app.appId, appUserId: null, grantId: "grt1", period: "2026-01", model: "m", generationId: null, promptTokens: 1, completionTokens: 2, costNano: 3, source: "estimated", status: "client_disconnected", streamed: false, startedAt: at, finishedAt: at, reservedNano: null },
    ]);
    const res = await a.admin(`/apps/${app.appId}/usage?from=2026-01-15&to=2026-01-15`);
    const documented = operation("get", "/api/v1/admin/apps/{appId}/usage").responses["200"].content;
    expect(Object.keys(documented).sort()).toEqual(["application/x-ndjson", "text/csv"]);
    expect(res.headers.get("content-type")).toBe("application/x-ndjson");
    const validate = ajv.compile(documented["application/x-ndjson"].schema);
    const lines = (await res.text()).trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    for (const line of lines) expect({ line, errors: validate(JSON.parse(line)) ? [] : validate.errors }).toEqual({ line, errors: [] });
    expect(validate({ ...JSON.parse(lines[0]!), costUsd: "3" })).toBe(false);
  });
});
