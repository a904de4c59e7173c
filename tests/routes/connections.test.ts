import { describe, expect, test } from "bun:test";
import { makeTestApp, mintSession, T0, type TestApp } from "../helpers/test-app";
import { expectError, expectOk, UUID } from "../helpers/expect";

const CONNECTIONS = "/api/v1/connections";

/** An app with a client app and a helper to mint tokens for one user. */
async function setup(env: Record<string, string> = {}) {
  const t = makeTestApp({ env });
  const client = await t.createClientApp({ origins: ["https://a.example"] });
  const token = (user: string, limit?: number) => mintSession(t, client.secretKey, user, limit);
  const status = async (user: string) => expectOk(await t.call(`/api/v1/status?appUserId=${encodeURIComponent(user)}`, { bearer: client.secretKey }));
  return { t, client, token, status };
}

const approve = (t: TestApp, token: string, json?: unknown) =>
  t.call(CONNECTIONS, json === undefined ? { method: "POST", bearer: token } : { bearer: token, json });

describe("GET /api/v1/connections", () => {
  test("a user who never connected: connected false, limit 0, remaining 0, usage and period shown", async () => {
    const { t, token } = await setup();
    const body = await expectOk(await t.call(CONNECTIONS, { bearer: await token("new-user") }));
    expect(body).toEqual({
      connected: false,
      appUserId: "new-user",
      limits: { monthlyUsd: 0 },
      usage: { monthlyUsd: 0 },
      remainingUsd: 0,
      period: { start: "2026-01-01T00:00:00.000Z", end: "2026-02-01T00:00:00.000Z" },
      resetsAt: "2026-02-01T00:00:00.000Z",
      fundingSource: "app",
      upstreamCredit: null,
      fundingStatus: "ok",
      connectedAt: null,
      updatedAt: null,
    });
  });

  test("401 auth without a token", async () => {
    const { t } = await setup();
    await expectError(await t.call(CONNECTIONS), 401, "auth");
  });
});

describe("POST /api/v1/connections: approve, update, revoke, re-approve", () => {
  test("the whole life of a connection", async () => {
    const { t, token, status } = await setup();
    const tok = await token("alice");

    // Approve.
    const approved = await expectOk(await approve(t, tok, { monthlyUsd: 10 }));
    expect(approved).toMatchObject({
      connected: true,
      appUserId: "alice",
      limits: { monthlyUsd: 10 },
      usage: { monthlyUsd: 0 },
      remainingUsd: 10,
      fundingStatus: "ok",
      connectedAt: new Date(T0).toISOString(),
      updatedAt: new Date(T0).toISOString(),
    });
    expect(await expectOk(await t.call(CONNECTIONS, { bearer: tok }))).toEqual(approved);
    expect(await status("alice")).toMatchObject({ connected: true, limits: { monthlyUsd: 10 }, remainingUsd: 10 });

    // Update: the cap changes, connectedAt stays, updatedAt moves.
    t.clock.advance(60_000);
    const updated = await expectOk(await approve(t, tok, { monthlyUsd: 4.5 }));
    expect(updated).toMatchObject({
      connected: true,
      limits: { monthlyUsd: 4.5 },
      remainingUsd: 4.5,
      connectedAt: new Date(T0).toISOString(),
      updatedAt: new Date(T0 + 60_000).toISOString(),
    });
    expect(await status("alice")).toMatchObject({ limits: { monthlyUsd: 4.5 } });

    // Revoke: 204 with an empty body, twice.
    t.clock.advance(60_000);
    for (let i = 0; i < 2; i++) {
      const res = await t.call(CONNECTIONS, { method: "DELETE", bearer: tok });
      expect(res.status).toBe(204);
      expect(res.headers.get("x-request-id")).toMatch(UUID);
      expect(await res.text()).toBe("");
    }
    expect(await expectOk(await t.call(CONNECTIONS, { bearer: tok }))).toMatchObject({
      connected: false,
      limits: { monthlyUsd: 0 },
      remainingUsd: 0,
      connectedAt: null,
    });
    expect(await status("alice")).toMatchObject({ connected: false, limits: { monthlyUsd: 0 }, remainingUsd: 0 });

    // Re-approve: a new connection, connectedAt moves to now.
    t.clock.advance(60_000);
    const again = await expectOk(await approve(t, tok, { monthlyUsd: 3 }));
    expect(again).toMatchObject({
      connected: true,
      limits: { monthlyUsd: 3 },
      connectedAt: new Date(T0 + 180_000).toISOString(),
      updatedAt: new Date(T0 + 180_000).toISOString(),
    });
    expect(await status("alice")).toMatchObject({ connected: true, limits: { monthlyUsd: 3 }, remainingUsd: 3 });
  });

  test("DELETE for a user who never connected is 204 too", async () => {
    const { t, token } = await setup();
    const res = await t.call(CONNECTIONS, { method: "DELETE", bearer: await token("nobody") });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
  });

  test("401 auth on DELETE without a token", async () => {
    const { t } = await setup();
    await expectError(await t.call(CONNECTIONS, { method: "DELETE" }), 401, "auth");
  });
});

describe("POST /api/v1/connections: which cap", () => {
  test("no body: the token's requested limit", async () => {
    const { t, token } = await setup();
    const body = await expectOk(await approve(t, await token("u", 12)));
    expect(body.limits).toEqual({ monthlyUsd: 12 });
  });

  test("an empty JSON object: the token's requested limit", async () => {
    const { t, token } = await setup();
    expect((await expectOk(await approve(t, await token("u", 12), {}))).limits).toEqual({ monthlyUsd: 12 });
  });

  test("the body's monthlyUsd wins over the token's limit when it is lower", async () => {
    const { t, token } = await setup();
    expect((await expectOk(await approve(t, await token("u", 12), { monthlyUsd: 7 }))).limits).toEqual({ monthlyUsd: 7 });
  });

  test("the body may equal the token's limit and the configured maximum", async () => {
    const { t, token } = await setup({ MAX_MONTHLY_USD: "40" });
    expect((await expectOk(await approve(t, await token("u", 40), { monthlyUsd: 40 }))).limits).toEqual({ monthlyUsd: 40 });
  });

  test("an update without monthlyUsd and a token without a limit keeps the current cap", async () => {
    const { t, token } = await setup();
    await expectOk(await approve(t, await token("u"), { monthlyUsd: 8 }));
    t.clock.advance(1_000);
    const kept = await expectOk(await approve(t, await token("u"), {}));
    expect(kept).toMatchObject({ connected: true, limits: { monthlyUsd: 8 }, updatedAt: new Date(T0 + 1_000).toISOString() });
    expect((await expectOk(await approve(t, await token("u")))).limits).toEqual({ monthlyUsd: 8 });
  });

  test("after a revoke there is no current cap to keep: 400", async () => {
    const { t, token } = await setup();
    const tok = await token("u");
    await expectOk(await approve(t, tok, { monthlyUsd: 8 }));
    await t.call(CONNECTIONS, { method: "DELETE", bearer: tok });
    await expectError(await approve(t, tok, {}), 400, "invalid_request", /monthlyUsd/);
  });
});

describe("POST /api/v1/connections: monthlyUsd bounds (400 invalid_request naming monthlyUsd)", () => {
  const cases: Array<[string, string | Record<string, unknown>]> = [
    ["zero", { monthlyUsd: 0 }],
    ["negative", { monthlyUsd: -5 }],
    ["a string", { monthlyUsd: "5" }],
    ["null", { monthlyUsd: null }],
    ["1e400, which JSON-parses to Infinity", '{"monthlyUsd":1e400}'],
    ["above MAX_MONTHLY_USD", { monthlyUsd: 100.5 }],
    ["too small to be a nano-dollar", { monthlyUsd: 1e-12 }],
  ];
  for (const [name, json] of cases) {
    test(name, async () => {
      const { t, token } = await setup({ MAX_MONTHLY_USD: "100" });
      await expectError(await approve(t, await token("u"), json), 400, "invalid_request", /monthlyUsd/);
    });
  }

  test("above the token's requested limit", async () => {
    const { t, token } = await setup();
    await expectError(await approve(t, await token("u", 10), { monthlyUsd: 10.01 }), 400, "invalid_request", /monthlyUsd.*limit the app requested/);
  });

  test("missing, and the token names no limit and there is no connection", async () => {
    const { t, token } = await setup();
    await expectError(await approve(t, await token("u")), 400, "invalid_request", /monthlyUsd is required/);
    await expectError(await approve(t, await token("u"), {}), 400, "invalid_request", /monthlyUsd is required/);
  });

  test("a rejected cap leaves the connection as it was", async () => {
    const { t, token, status } = await setup({ MAX_MONTHLY_USD: "100" });
    await expectOk(await approve(t, await token("u"), { monthlyUsd: 5 }));
    await expectError(await approve(t, await token("u"), { monthlyUsd: 500 }), 400, "invalid_request");
    expect(await status("u")).toMatchObject({ connected: true, limits: { monthlyUsd: 5 } });
  });
});

describe("POST /api/v1/connections: malformed bodies", () => {
  test("invalid JSON is 400, not an approval at the token's limit", async () => {
    const { t, token, status } = await setup();
    const tok = await token("u", 10);
    await expectError(await approve(t, tok, '{"monthlyUsd": 5'), 400, "invalid_request", /^request body is not valid JSON/);
    expect(await status("u")).toMatchObject({ connected: false, limits: { monthlyUsd: 0 } });
  });

  for (const body of ["5", '"5"', "true", "null", "[1,2]", "[]"]) {
    test(`a JSON body that is not an object (${body}) is 400, not an approval at the token's limit`, async () => {
      const { t, token, status } = await setup();
      await expectError(await approve(t, await token("u", 10), body), 400, "invalid_request", /^body: /);
      expect(await status("u")).toMatchObject({ connected: false });
    });
  }

  test("a text/plain body is 400, not an approval at the token's limit", async () => {
    const { t, token, status } = await setup();
    const res = await t.call(CONNECTIONS, {
      method: "POST",
      bearer: await token("u", 10),
      body: JSON.stringify({ monthlyUsd: 5 }),
      headers: { "content-type": "text/plain" },
    });
    await expectError(res, 400, "invalid_request");
    expect(await status("u")).toMatchObject({ connected: false });
  });

  test("413 payload_too_large on an oversized declared content-length", async () => {
    const { t, token } = await setup({ MAX_BODY_BYTES: "1024" });
    const tok = await token("u", 10);
    const res = await t.call(CONNECTIONS, { bearer: tok, json: { monthlyUsd: 5 }, headers: { "content-length": "1025" } });
    await expectError(res, 413, "payload_too_large");
  });
});

describe("funding_invalid", () => {
  test("is shown on the connection and cleared by approving again", async () => {
    const { t, client, token } = await setup();
    const tok = await token("u", 10);
    await expectOk(await approve(t, tok));
    t.clock.advance(5_000);
    await t.deps.store.connections.markFundingInvalid(client.appId, "u", t.clock.now());
    expect(await expectOk(await t.call(CONNECTIONS, { bearer: tok }))).toMatchObject({
      connected: true,
      fundingStatus: "invalid",
      updatedAt: new Date(T0 + 5_000).toISOString(),
    });
    t.clock.advance(5_000);
    expect(await expectOk(await approve(t, tok))).toMatchObject({
      connected: true,
      fundingStatus: "ok",
      limits: { monthlyUsd: 10 },
      connectedAt: new Date(T0).toISOString(),
      updatedAt: new Date(T0 + 10_000).toISOString(),
    });
    expect((await expectOk(await t.call(CONNECTIONS, { bearer: tok }))).fundingStatus).toBe("ok");
  });
});

describe("a user's writes are rate limited per user (RL_USER_WRITES)", () => {
  test("approve, update, revoke and a funding start share the user's window: past it 429 with the RateLimit headers; reads, and other users, are not held", async () => {
    const { t, client, token } = await setup({ RL_USER_WRITES_LIMIT: "4", RL_USER_WRITES_WINDOW_SECONDS: "60" });
    await t.deps.store.apps.update(client.appId, { fundingSources: ["app", "user"] });
    await t.deps.store.webhooks.createEndpoint(client.appId, "https://hooks.example/writes", null, T0);
    const tok = await token("alice");
    const writes = [
      await approve(t, tok, { monthlyUsd: 5 }),
      await approve(t, tok, { monthlyUsd: 6 }),
      await t.call(CONNECTIONS, { method: "DELETE", bearer: tok }),
      await t.call(`${CONNECTIONS}/funding`, { bearer: tok, json: { monthlyUsd: 5 } }),
    ];
    expect(writes.map((w) => w.status)).toEqual([200, 200, 204, 201]);
    expect(writes.map((w) => w.headers.get("ratelimit-remaining"))).toEqual(["3", "2", "1", "0"]);
    expect(writes[0]!.headers.get("ratelimit-limit")).toBe("4");

    t.clock.advance(15_000);
    for (const refused of [
      await approve(t, tok, { monthlyUsd: 7 }),
      await t.call(CONNECTIONS, { method: "DELETE", bearer: tok }),
      await t.call(`${CONNECTIONS}/funding`, { bearer: tok, json: {} }),
    ]) {
      await expectError(refused, 429, "rate_limited");
      expect(refused.headers.get("retry-after")).toBe("45");
      expect(refused.headers.get("ratelimit-remaining")).toBe("0");
      expect(refused.headers.get("ratelimit-reset")).toBe("45");
    }
    // The refused writes changed nothing and emitted no event (approve, update, revoke did: three);
    // reading the connection is not a write.
    expect((await expectOk(await t.call(CONNECTIONS, { bearer: tok }))).connected).toBe(false);
    expect((await t.deps.store.webhooks.listDeliveries(client.appId, 100)).map((d) => d.type).sort()).toEqual([
      "connection.approved",
      "connection.revoked",
      "connection.updated",
    ]);
    // The app's page may read them (CORS).
    const fromPage = await t.call(CONNECTIONS, { bearer: tok, json: { monthlyUsd: 7 }, headers: { origin: "https://a.example" } });
    expect(fromPage.status).toBe(429);
    expect(fromPage.headers.get("access-control-allow-origin")).toBe("https://a.example");
    expect(fromPage.headers.get("access-control-expose-headers")).toBe("ratelimit-limit, ratelimit-remaining, ratelimit-reset, retry-after");
    // Another user of the same app writes on.
    expect((await approve(t, await token("bob"), { monthlyUsd: 5 })).status).toBe(200);

    t.clock.advance(45_000);
    expect((await approve(t, tok, { monthlyUsd: 7 })).status).toBe(200);
  });

  test("the default is generous enough for a person: thirty writes a minute", async () => {
    const { t, token } = await setup();
    const tok = await token("carol");
    const statuses: number[] = [];
    for (let i = 0; i < 31; i++) statuses.push((await approve(t, tok, { monthlyUsd: 1 + (i % 5) })).status);
    expect(statuses).toEqual([...Array<number>(30).fill(200), 429]);
  });
});
