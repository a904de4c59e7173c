/**
 * The admin API in the published openapi.json: every operation behind the adminToken
 * scheme with its errors as the one envelope, its request bodies, and real responses
 * (success and error) that validate against what is documented.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { makeTestApp } from "./helpers/test-app";
import { makeAdminTestApp } from "./helpers/admin";
import { expectOk } from "./helpers/expect";
import { approveConsentOrThrow } from "./helpers/grants";
import { publishedDocument, type Json, type PublishedDocument } from "./helpers/openapi-validator";

let doc: PublishedDocument;
let spec: Json;

beforeAll(async () => {
  doc = await publishedDocument(makeTestApp().call);
  spec = doc.spec;
});

const operation = (method: string, path: string) => doc.operation(method, path);

describe("the admin API in openapi.json", () => {
  const adminOperations = () => doc.operations().filter(({ path }) => path.startsWith("/api/v1/admin/"));

  test("every admin operation: the adminToken scheme, the admin tag, and 401, 404 and 429 as the error envelope", () => {
    expect(spec.components.securitySchemes.adminToken).toMatchObject({ type: "http", scheme: "bearer" });
    const operations = adminOperations();
    expect(operations.map((o) => `${o.method} ${o.path}`).sort()).toEqual(
      [
        "post /apps",
        "get /apps",
        "get /apps/{appId}",
        "patch /apps/{appId}",
        "post /apps/{appId}/disable",
        "post /apps/{appId}/enable",
        "get /apps/{appId}/keys",
        "post /apps/{appId}/keys",
        "delete /apps/{appId}/keys/{keyId}",
        "get /apps/{appId}/connections",
        "get /apps/{appId}/connections/{appUserId}",
        "delete /apps/{appId}/connections/{appUserId}",
        "get /apps/{appId}/grants",
        "delete /apps/{appId}/grants/{grantId}",
        "get /apps/{appId}/usage",
        "post /apps/{appId}/webhooks",
        "get /apps/{appId}/webhooks",
        "get /apps/{appId}/webhooks/deliveries",
        "post /apps/{appId}/webhooks/{endpointId}/disable",
        "post /apps/{appId}/webhooks/{endpointId}/enable",
        "delete /apps/{appId}/webhooks/{endpointId}",
      ]
        .map((o) => o.replace(" /", " /api/v1/admin/"))
        .sort(),
    );
    for (const { path, method, op } of operations) {
      expect({ path, method, security: op.security, tags: op.tags }).toEqual({ path, method, security: [{ adminToken: [] }], tags: ["admin"] });
      for (const status of ["401", "404", "429"]) {
        expect({ path, method, status, schema: op.responses?.[status]?.content?.["application/json"]?.schema }).toEqual({
          path,
          method,
          status,
          schema: { $ref: "#/components/schemas/Error" },
        });
      }
    }
    // No app route takes the admin token, and no admin route an app credential.
    const appRoutesTakingIt = doc
      .operations()
      .filter((o) => !o.path.startsWith("/api/v1/admin/") && JSON.stringify(o.op.security ?? []).includes("adminToken"))
      .map((o) => `${o.method} ${o.path}`);
    expect(appRoutesTakingIt).toEqual([]);
  });

  test("create and update document their JSON bodies", () => {
    const create = operation("post", "/api/v1/admin/apps").requestBody;
    expect(create?.required).toBe(true);
    expect(create?.content?.["application/json"]?.schema?.required).toEqual(["name"]);
    const update = operation("patch", "/api/v1/admin/apps/{appId}").requestBody?.content?.["application/json"]?.schema;
    expect(Object.keys(update?.properties ?? {}).sort()).toEqual(["fundingSources", "grantDailyCeilingUsd", "maxGrantUsd", "name", "origins"]);
    const webhook = operation("post", "/api/v1/admin/apps/{appId}/webhooks").requestBody?.content?.["application/json"]?.schema;
    expect(webhook?.required).toEqual(["url"]);
  });

  test("real admin responses, success and error, validate against the document", async () => {
    const a = makeAdminTestApp({ env: { MAX_BODY_BYTES: "4096", RL_ADMIN_AUTH_LIMIT: "1" } });
    const checked: string[] = [];
    const check = async (method: string, template: string, path: string, init: Parameters<typeof a.admin>[1], expected: number) => {
      const res = await a.admin(path, { ...init, method: method.toUpperCase() });
      const where = `${method} ${path} → ${expected}`;
      expect({ where, status: res.status, errors: await doc.conformance(method, `/api/v1/admin${template}`, res) }).toEqual({
        where,
        status: expected,
        errors: [],
      });
      checked.push(`${method} ${template} ${expected}`);
    };
    const created = await expectOk(await a.admin("/apps", { json: { name: "documented", origins: ["https://d.example"] } }), 201);
    const id = created.appId as string;
    await a.deps.store.connections.approve(id, "u1", 2e9, a.clock.now());
    const consent = await a.deps.store.grants.createConsentRequest(
      { appId: id, usdCapNano: 1e9, maxUses: null, ttlSeconds: 600, origin: "https://d.example", state: "" },
      a.clock.now(),
      60_000,
    );
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
      {
        requestId: "r1",
        account: `u/${app.appId}/2026-01/u`,
        appId: app.appId,
        appUserId: "u",
        grantId: null,
        period: "2026-01",
        model: "m",
        generationId: "g",
        promptTokens: 1,
        completionTokens: 2,
        costNano: 3,
        source: "computed",
        status: "ok",
        streamed: true,
        startedAt: at,
        finishedAt: at,
        reservedNano: 5,
        overrunNano: 0,
      },
      {
        requestId: "r2",
        account: "g/grt1",
        appId: app.appId,
        appUserId: null,
        grantId: "grt1",
        period: "2026-01",
        model: "m",
        generationId: null,
        promptTokens: 1,
        completionTokens: 2,
        costNano: 3,
        source: "estimated",
        status: "client_disconnected",
        streamed: false,
        startedAt: at,
        finishedAt: at,
        reservedNano: null,
      },
    ]);
    const res = await a.admin(`/apps/${app.appId}/usage?from=2026-01-15&to=2026-01-15`);
    const documented = operation("get", "/api/v1/admin/apps/{appId}/usage").responses["200"].content;
    expect(Object.keys(documented).sort()).toEqual(["application/x-ndjson", "text/csv"]);
    expect(res.headers.get("content-type")).toBe("application/x-ndjson");
    const validate = doc.compile(documented["application/x-ndjson"].schema);
    const lines = (await res.text()).trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    for (const line of lines) expect({ line, errors: validate(JSON.parse(line)) ? [] : validate.errors }).toEqual({ line, errors: [] });
    expect(validate({ ...JSON.parse(lines[0]!), costUsd: "3" })).toBe(false);
  });
});
