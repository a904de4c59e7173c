/**
 * The mock's upstream keys: who may call (the operator's keys as before, the user keys it
 * issued, 401 for the rest), the credit each key's limit leaves and the 402 when it cannot
 * pay, GET /key, and limits that reset monthly on a driven clock. The PKCE flow that makes
 * user keys: mock-pkce.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { createMockUpstream, type MockModel } from "../../packages/mock-upstream/src";
import { validateError, validateKeyEndpointError } from "../helpers/openrouter-spec";
import { BASE, chat, connectUser, keyInfo, paidChat } from "./pkce-helpers";

/**
 * Prices that are exact in binary, so credit arithmetic has no float noise: a quarter dollar
 * per completion token, prompts free. The reasoner's reasoning tokens cost the same.
 */
const QUARTER: MockModel = { id: "test/quarter", name: "Quarter", pricing: { prompt: "0", completion: "0.25" }, contextLength: 1000, maxCompletionTokens: 100 };
const REASONER: MockModel = { ...QUARTER, id: "test/reasoner", name: "Reasoner", reasons: true };
const FREE: MockModel = { id: "test/free", name: "Free", pricing: { prompt: "0", completion: "0" }, contextLength: 1000, maxCompletionTokens: 100 };
const MODELS = [QUARTER, REASONER, FREE];

/** Refused with 402: the body is the spec's PaymentRequiredResponse; its message. */
async function refused402(response: Response): Promise<string> {
  const body = (await response.json()) as any;
  expect({ status: response.status, body }).toMatchObject({ status: 402 });
  expect(validateError(body, 402)).toEqual([]);
  return body.error.message;
}

async function refused401(response: Response, endpoint?: "/key"): Promise<string> {
  const body = (await response.json()) as any;
  expect({ status: response.status, body }).toMatchObject({ status: 401 });
  expect(endpoint ? validateKeyEndpointError(endpoint, body, 401) : validateError(body, 401)).toEqual([]);
  return body.error.message;
}

function getKey(mock: ReturnType<typeof createMockUpstream>, key: string, path = "/key"): Promise<Response> {
  return mock.fetch(new Request(`${BASE}${path}`, { headers: { authorization: `Bearer ${key}` } }));
}

describe("who may call", () => {
  test("the operator's key is as before: any key the mock did not issue, no limit, its spend at GET /key", async () => {
    const mock = createMockUpstream({ models: MODELS });
    for (const key of ["demo", "sk-or-test", "sk-or-v1-test"]) await paidChat(mock, key, "test/quarter", "[[mock tokens=3]]");
    const info = await keyInfo(mock, "demo");
    expect(info).toMatchObject({ limit: null, limit_remaining: null, limit_reset: null, usage: 0.75, usage_monthly: 0.75, is_management_key: false });
    expect(info.label).not.toContain("demo");
    expect(mock.keys.get("sk-or-test")).toMatchObject({ kind: "operator" });
  });

  test("a key of the issued shape the mock never issued, and a deleted, disabled or expired key: 401 everywhere", async () => {
    let clock = Date.UTC(2026, 0, 15);
    const mock = createMockUpstream({ models: MODELS, now: () => clock });
    const stranger = `sk-or-v1-${"ab".repeat(32)}`;
    expect(await refused401(await chat(mock, stranger, "test/free", "hi"))).toBe("User not found.");
    expect(await refused401(await getKey(mock, stranger), "/key")).toBe("User not found.");
    expect((await getKey(mock, stranger, "/generation?id=gen-1")).status).toBe(401);

    const deleted = mock.keys.create();
    const disabled = mock.keys.create();
    const expiring = mock.keys.create({ expiresAt: clock + 1000 });
    await paidChat(mock, expiring.key, "test/free", "hi");
    expect((await keyInfo(mock, expiring.key)).expires_at).toBe("2026-01-15T00:00:01.000Z");
    deleted.deleted = true;
    disabled.disabled = true;
    clock += 1000;
    expect(await refused401(await chat(mock, deleted.key, "test/free", "hi"))).toBe("User not found.");
    expect(await refused401(await chat(mock, disabled.key, "test/free", "hi"))).toBe("API key is disabled");
    expect(await refused401(await chat(mock, expiring.key, "test/free", "hi"))).toBe("API key has expired");
    disabled.disabled = false;
    await paidChat(mock, disabled.key, "test/free", "hi");
  });

  test("with operatorKeys, any other key the mock did not issue is unknown: 401", async () => {
    const mock = createMockUpstream({ models: MODELS, operatorKeys: ["sk-or-operator"] });
    await paidChat(mock, "sk-or-operator", "test/free", "hi");
    expect(await refused401(await chat(mock, "sk-or-test", "test/free", "hi"))).toBe("User not found.");
    const { key } = await connectUser(mock);
    await paidChat(mock, key, "test/free", "hi");
    expect(mock.served.map((s) => s.status)).toEqual([200, 401, 200]);
  });

  test("the messages of a missing and of a malformed Authorization header are unchanged", async () => {
    const mock = createMockUpstream();
    const ask = (headers: Record<string, string>) => mock.fetch(new Request(`${BASE}/key`, { headers }));
    expect(await refused401(await ask({}), "/key")).toBe("Missing Authentication header");
    expect(await refused401(await ask({ authorization: "sk-or-test" }), "/key")).toBe("Invalid Authorization header");
  });
});

describe("credit and 402", () => {
  test("the call before the limit passes; a call whose max_tokens the rest cannot afford, and any call once nothing is left, get 402", async () => {
    const mock = createMockUpstream({ models: MODELS });
    const user = mock.keys.create({ limitUsd: 1 });
    await paidChat(mock, user.key, "test/quarter", "[[mock tokens=2]]", { max_tokens: 2 });
    expect(await keyInfo(mock, user.key)).toMatchObject({ usage: 0.5, limit_remaining: 0.5 });

    const tooMany = await refused402(await chat(mock, user.key, "test/quarter", "[[mock tokens=2]]", { max_tokens: 4 }));
    expect(tooMany).toStartWith("This request requires more credits, or fewer max_tokens. You requested up to 4 tokens, but can only afford 2.");
    // Without max_tokens the worst case is the model's own maximum completion.
    expect(await refused402(await chat(mock, user.key, "test/quarter", "[[mock tokens=2]]"))).toContain(
      "You requested up to 100 tokens, but can only afford 2.",
    );

    await paidChat(mock, user.key, "test/quarter", "[[mock tokens=2]]", { max_tokens: 2 });
    expect(await keyInfo(mock, user.key)).toMatchObject({ usage: 1, limit_remaining: 0 });
    const message = "Insufficient credits. Add more using https://openrouter.ai/credits";
    expect(await refused402(await chat(mock, user.key, "test/quarter", "hi", { max_tokens: 1 }))).toBe(message);
    expect(await refused402(await chat(mock, user.key, "test/free", "hi"))).toBe(message);

    // A refused call never became a generation: nothing billed, no record.
    expect(mock.served.map((s) => [s.status, s.costUsd])).toEqual([
      [200, 0.5],
      [402, 0],
      [402, 0],
      [200, 0.5],
      [402, 0],
      [402, 0],
    ]);
    expect((await keyInfo(mock, user.key)).usage).toBe(1);
  });

  test("a call that runs past the limit (reasoning, which max_tokens does not bound) finishes, and the rest goes negative", async () => {
    const mock = createMockUpstream({ models: MODELS });
    const user = mock.keys.create({ limitUsd: 1 });
    await paidChat(mock, user.key, "test/reasoner", "[[mock tokens=2 reasoning=4]]", { max_tokens: 2 });
    expect(await keyInfo(mock, user.key)).toMatchObject({ usage: 1.5, limit_remaining: -0.5 });
    await refused402(await chat(mock, user.key, "test/free", "hi"));
  });

  test("the key's usage is what the upstream billed: an error finish waives the tokens", async () => {
    const mock = createMockUpstream({ models: MODELS });
    const user = mock.keys.create({ limitUsd: 10 });
    await paidChat(mock, user.key, "test/quarter", "[[mock tokens=4]]", { max_tokens: 4 });
    const errored = await chat(mock, user.key, "test/quarter", "[[mock tokens=4 error_200]]", { max_tokens: 4 });
    expect(errored.status).toBe(200);
    await errored.text();
    expect(mock.served.map((s) => s.costUsd)).toEqual([1, 0]);
    expect((await keyInfo(mock, user.key)).usage).toBe(1);
  });

  test("a monthly limit holds against the month's usage and resets with the UTC month", async () => {
    let clock = Date.UTC(2026, 0, 31, 23, 59);
    const mock = createMockUpstream({ models: MODELS, now: () => clock });
    const user = mock.keys.create({ limitUsd: 0.5, usageLimitType: "monthly" });
    await paidChat(mock, user.key, "test/quarter", "[[mock tokens=2]]", { max_tokens: 2 });
    await refused402(await chat(mock, user.key, "test/quarter", "[[mock tokens=2]]", { max_tokens: 2 }));
    clock = Date.UTC(2026, 1, 1, 0, 0);
    expect(await keyInfo(mock, user.key)).toMatchObject({
      usage: 0.5,
      usage_monthly: 0,
      usage_weekly: 0.5,
      usage_daily: 0,
      limit_remaining: 0.5,
      limit_reset: "monthly",
    });
    await paidChat(mock, user.key, "test/quarter", "[[mock tokens=2]]", { max_tokens: 2 });
    expect(await keyInfo(mock, user.key)).toMatchObject({ usage: 1, usage_monthly: 0.5, usage_weekly: 1, usage_daily: 0.5, limit_remaining: 0 });
    // 2026-02-01 is a Sunday: the week (from Monday, UTC) turns the next day.
    clock = Date.UTC(2026, 1, 2);
    expect(await keyInfo(mock, user.key)).toMatchObject({ usage_weekly: 0, usage_monthly: 0.5 });
  });

  test("operatorLimitUsd runs the operator's key out of credit the same way", async () => {
    const mock = createMockUpstream({ models: MODELS, operatorLimitUsd: 0.5 });
    await paidChat(mock, "sk-or-operator", "test/quarter", "[[mock tokens=2]]", { max_tokens: 2 });
    await refused402(await chat(mock, "sk-or-operator", "test/quarter", "hi", { max_tokens: 1 }));
    const { key } = await connectUser(mock);
    await paidChat(mock, key, "test/quarter", "[[mock tokens=2]]", { max_tokens: 2 });
  });
});
