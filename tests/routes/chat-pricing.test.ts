/**
 * What the proxy sends, refuses and records around the worst case (src/metering/): unknown
 * models, unbounded plugins and tools, the price pin, the reasoning budget, upstream
 * refusals, and an overrun when the upstream bills above its own catalogue.
 */
import { describe, expect, test } from "bun:test";
import { tmpdir } from "node:os";
import { BILLING_MODELS, DEFAULT_MODELS } from "../../packages/mock-upstream/src";
import { chatTestApp } from "../helpers/chat-app";
import { obtainGrant } from "../helpers/consent";

const json = async (r: Response): Promise<any> => r.json();
const models = () => [...DEFAULT_MODELS, ...BILLING_MODELS].map((m) => ({ ...m, pricing: { ...m.pricing } }));
/** The operator's token: /healthz shows its counters (overruns among them) only with it. */
const OPERATOR_TOKEN = "operator-metrics-token-0123";
const app = (env: Record<string, string> = {}) => chatTestApp({ mock: { models: models() }, env: { METRICS_TOKEN: OPERATOR_TOKEN, ...env } });
const hi = (extra: Record<string, unknown> = {}) => ({ model: "openai/gpt-4o-mini", max_tokens: 16, messages: [{ role: "user", content: "hi" }], ...extra });
const searching = () => hi({ model: "bill/search", plugins: [{ id: "web" }] });

const sentBody = (t: Awaited<ReturnType<typeof app>>): any => t.mock.served.at(-1)!.body;

describe("refused before anything is reserved", () => {
  test("an unknown model is 400 invalid_request, not a 502, and never reaches the upstream", async () => {
    const t = await app();
    await t.connect("alice", 5);
    for (const body of [hi({ model: "nobody/nothing" }), hi({ model: undefined, models: ["openai/gpt-4o-mini", "nobody/nothing"] })]) {
      const res = await t.chat(body);
      expect(res.status).toBe(400);
      const { error } = await json(res);
      expect(error.code).toBe("invalid_request");
      expect(error.message).toContain('unknown model "nobody/nothing"');
    }
    expect(t.mock.served).toHaveLength(0);
  });

  test("a model or models is required; models alone is enough", async () => {
    const t = await app();
    await t.connect("alice", 5);
    expect((await t.chat(hi({ model: undefined }))).status).toBe(400);
    const res = await t.chat(hi({ model: undefined, models: ["openai/gpt-4o-mini"] }));
    expect(res.status).toBe(200);
  });

  test("plugins and server tools whose cost cannot be bounded are refused with 400 naming them", async () => {
    const t = await app();
    await t.connect("alice", 5);
    const fusion = await json(await t.chat(hi({ plugins: [{ id: "fusion" }] })));
    expect(fusion.error.code).toBe("invalid_request");
    expect(fusion.error.message).toContain('plugin "fusion"');
    const tool = await json(await t.chat(hi({ tools: [{ type: "openrouter:web_search" }] })));
    expect(tool.error.message).toContain('server tool "openrouter:web_search"');
    // Free plugins and disabled ones pass.
    expect((await t.chat(hi({ plugins: [{ id: "response-healing" }, { id: "fusion", enabled: false }] }))).status).toBe(200);
    expect(t.mock.served).toHaveLength(1);
  });

  test("an operator can allow a plugin at a fixed per-call reservation", async () => {
    const t = await app({ PLUGIN_RESERVATIONS_USD: "fusion=0.25,openrouter:web_search=0.5" });
    await t.connect("alice", 5);
    const res = await t.chat(hi({ plugins: [{ id: "fusion" }], tools: [{ type: "openrouter:web_search" }] }));
    expect(res.status).toBe(200);
    expect(Number(res.headers.get("x-metering-reserved-usd"))).toBeGreaterThanOrEqual(0.75);
  });

  test("a variable (-1) price on a dimension the request uses is refused; requests that do not use it pass", async () => {
    const search = BILLING_MODELS.find((m) => m.id === "bill/search")!;
    const variableSearch = { ...search, id: "bill/variable-search", pricing: { ...search.pricing, web_search: "-1" } };
    const t = await chatTestApp({ mock: { models: [...models(), variableSearch] } });
    await t.connect("alice", 5);
    const refused = await json(await t.chat(hi({ model: "bill/variable-search", plugins: [{ id: "web" }] })));
    expect(refused.error.code).toBe("invalid_request");
    expect(refused.error.message).toContain("variable (-1) web_search price");
    expect((await t.chat(hi({ model: "bill/variable-search" }))).status).toBe(200);
  });

  test("per-page PDF parsing is refused; a file-parser plugin with a token-billed engine passes", async () => {
    const t = await app();
    await t.connect("alice", 5);
    const file = { type: "file", file: { filename: "a.pdf", file_data: "data:application/pdf;base64,AAAA" } };
    const pdf = await json(await t.chat(hi({ messages: [{ role: "user", content: [{ type: "text", text: "read" }, file] }] })));
    expect(pdf.error.message).toContain("file-parser");
    const parsed = await t.chat(hi({ plugins: [{ id: "file-parser", pdf: { engine: "pdf-text" } }], messages: [{ role: "user", content: [file] }] }));
    expect(parsed.status).toBe(200);
  });
});

describe("what is sent upstream", () => {
  test("provider.max_price pins the listed prices, keeps the client's other preferences and its lower prices", async () => {
    const t = await app();
    await t.connect("alice", 5);
    await t.chat(hi({ provider: { order: ["openai"], max_price: { completion: 0.1, audio: "3" } } }));
    // gpt-4o-mini is listed at $0.15/M prompt and $0.60/M completion; the client's $0.10/M completion is lower.
    expect(sentBody(t).provider).toEqual({ order: ["openai"], max_price: { prompt: "0.15", completion: "0.1", request: "0", image: "0", audio: "3" } });
  });

  test("a refusal by the upstream (404 under the pin, 400) is 400 invalid_request with its message", async () => {
    const t = await app();
    await t.connect("alice", 5);
    const pinned = await t.chat(hi({ model: "bill/multi", provider: { max_price: { prompt: 0.0001 } } }));
    expect(pinned.status).toBe(400);
    expect((await json(pinned)).error.message).toContain("HTTP 404");
    const bad = await t.chat(hi({ messages: [{ role: "user", content: "[[mock status=422]]" }] }));
    expect(bad.status).toBe(400);
    const flaky = await t.chat(hi({ messages: [{ role: "user", content: "[[mock status=503]]" }] }));
    expect(flaky.status).toBe(502);
  });

  test("reasoning models get reasoning.max_tokens; an effort becomes its share of max_tokens; off stays off", async () => {
    const t = await app();
    await t.connect("alice", 5);
    const plain = await t.chat(hi({ model: "bill/reasoner", max_tokens: 2000 }));
    expect(sentBody(t).reasoning).toEqual({ max_tokens: 2000 });
    expect(plain.headers.get("x-metering-reasoning-max-tokens")).toBe("2000");
    await t.chat(hi({ model: "bill/reasoner", max_tokens: 2000, reasoning_effort: "medium", reasoning: { exclude: true } }));
    expect(sentBody(t).reasoning).toEqual({ exclude: true, max_tokens: 1024 });
    expect(sentBody(t).reasoning_effort).toBeUndefined();
    await t.chat(hi({ model: "bill/reasoner", max_tokens: 4000, reasoning: { effort: "high" } }));
    expect(sentBody(t).reasoning).toEqual({ max_tokens: 3200 });
    const off = await t.chat(hi({ model: "bill/reasoner", reasoning: { enabled: false } }));
    expect(sentBody(t).reasoning).toEqual({ enabled: false });
    expect(off.headers.get("x-metering-reasoning-max-tokens")).toBeNull();
    // Not a reasoning model: nothing about reasoning is added.
    await t.chat(hi());
    expect(sentBody(t).reasoning).toBeUndefined();
  });
});

describe("an overrun (the upstream bills above its own catalogue)", () => {
  test("marks the row, counts in /healthz, freezes the budget until the cap is raised or the period rolls over", async () => {
    const t = await app();
    await t.connect("alice", 5);
    // The web-search price changes upstream after the proxy loaded the catalogue: 10×.
    // provider.max_price cannot pin that dimension, so the call costs more than it reserved.
    const model = t.mock.models.find((m) => m.id === "bill/search")!;
    model.pricing.web_search = "0.04";
    const first = await t.chat(searching());
    expect(first.status).toBe(200);
    await t.flush();
    const row = (await t.deps.store.usageLedger.find(first.headers.get("x-request-id")!))!;
    expect(row.overrunNano).toBeGreaterThan(0);
    expect(row.costNano - row.reservedNano!).toBe(row.overrunNano!);
    const usage = await json(await t.get("/api/v1/usage?appUserId=alice&period=2026-01"));
    expect(usage.data[0].overrunUsd).toBeGreaterThan(0);
    const health = await json(await t.app.handle(new Request("http://localhost/healthz", { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } })));
    expect(health.overruns).toEqual({ count: 1, models: { "bill/search": 1 } });
    expect(t.logs.filter((l) => l.includes("actual cost exceeded the reservation"))).toHaveLength(1);

    const frozen = await t.chat(hi());
    expect(frozen.status).toBe(402);
    const { error } = await json(frozen);
    expect(error).toMatchObject({ code: "budget_exceeded", limitUsd: 5, remainingUsd: 0 });
    expect(error.message).toContain("cost more than it reserved");
    expect(t.mock.served).toHaveLength(1);

    await t.connect("alice", 6); // a raised cap lifts the freeze
    model.pricing.web_search = "0.004";
    expect((await t.chat(hi())).status).toBe(200);
  });

  test("the freeze survives a restart on the same store, and a new period starts unfrozen", async () => {
    const path = `${tmpdir()}/overrun-${crypto.randomUUID()}.sqlite`;
    const first = await chatTestApp({ mock: { models: models() }, storePath: path });
    await first.connect("alice", 5);
    first.mock.models.find((m) => m.id === "bill/search")!.pricing.web_search = "0.04";
    expect((await first.chat(searching())).status).toBe(200);
    await first.flush();
    await first.deps.store.close();

    const second = await chatTestApp({ mock: { models: models() }, storePath: path, clock: first.clock });
    const auth = { authorization: `Bearer ${first.secretKey}`, "content-type": "application/json", "x-service-user": "alice" };
    const call = () =>
      second.app.handle(new Request("http://localhost/api/v1/chat/completions", { method: "POST", headers: auth, body: JSON.stringify(hi()) }));
    expect((await call()).status).toBe(402);
    second.clock.set(Date.UTC(2026, 1, 1, 0, 0, 1));
    expect((await call()).status).toBe(200);
  });

  test("a grant's overrun freezes its app's day too, for the app's other grants, and the day stays frozen after a restart", async () => {
    const path = `${tmpdir()}/overrun-day-${crypto.randomUUID()}.sqlite`;
    const env = { GRANT_DAILY_CEILING_USD: "5" };
    const first = await chatTestApp({ mock: { models: models() }, storePath: path, env });
    const [spender, bystander] = [await obtainGrant(first, { usd: "1" }), await obtainGrant(first, { usd: "1" })];
    const withGrant = (grant: { grantToken: string }) => ({ "x-service-user": "", "x-service-grant": grant.grantToken });
    first.mock.models.find((m) => m.id === "bill/search")!.pricing.web_search = "0.04";
    expect((await first.chat(searching(), withGrant(spender))).status).toBe(200);
    await first.flush();
    const dayRefusal = async (res: Response) => {
      expect(res.status).toBe(402);
      const { error } = await json(res);
      expect(error).toMatchObject({ code: "budget_exceeded", limitUsd: 5, remainingUsd: 0 });
      expect(error.message).toContain("daily ceiling");
    };
    await dayRefusal(await first.chat(hi(), withGrant(bystander)));
    await first.deps.store.close();

    const second = await chatTestApp({ mock: { models: models() }, storePath: path, clock: first.clock, env });
    const headers = { authorization: `Bearer ${first.secretKey}`, "content-type": "application/json", ...withGrant(bystander) };
    const call = () => second.app.handle(new Request("http://localhost/api/v1/chat/completions", { method: "POST", headers, body: JSON.stringify(hi()) }));
    await dayRefusal(await call());
    expect(second.mock.served).toHaveLength(0);
  });
});

describe("GET /api/v1/models", () => {
  test("before the catalogue has loaded: 503 unavailable in the error envelope", async () => {
    const t = await chatTestApp({ mock: { models: [] } });
    const res = await t.get("/api/v1/models");
    expect(res.status).toBe(503);
    expect((await json(res)).error).toEqual({ code: "unavailable", message: expect.stringContaining("not been loaded") });
  });

  test("lists the catalogue as the upstream lists it, behind the secret key", async () => {
    const t = await app();
    const res = await t.get("/api/v1/models");
    expect(res.status).toBe(200);
    const body = await json(res);
    expect(body.data.map((m: { id: string }) => m.id)).toEqual(models().map((m) => m.id));
    expect(body.data.find((m: { id: string }) => m.id === "bill/fee").pricing.request).toBe("0.002");
    const anonymous = await t.app.handle(new Request("http://localhost/api/v1/models"));
    expect(anonymous.status).toBe(401);
  });
});
