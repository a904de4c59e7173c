/**
 * The mock's PKCE flow (spec: /auth/keys, /auth/keys/code; the /auth page): page, Approve or
 * Deny, the code's redirect, its exchange for a key with S256 or plain, and every way an
 * exchange is refused (wrong verifier, reused code, expired code on a driven clock). Keys,
 * credit and GET /key: mock-keys.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { CODE_LIFETIME_MS, createMockUpstream } from "../../packages/mock-upstream/src";
import { validateAuthKeysCode, validateKeyEndpointError } from "../helpers/openrouter-spec";
import {
  BASE,
  CALLBACK,
  approvedCode,
  authPage,
  connectUser,
  exchange,
  formFields,
  keyInfo,
  pageCookie,
  paidChat,
  pkcePair,
  refusedExchange,
  submit,
} from "./pkce-helpers";

const OPERATOR = "sk-or-test-operator";

describe("the whole flow", () => {
  test("page → Approve → code → exchange → key → a chat call billed to that key → GET /key shows it", async () => {
    const mock = createMockUpstream();
    const { verifier, challenge } = pkcePair();
    const page = await authPage(mock, {
      callback_url: CALLBACK,
      code_challenge: challenge,
      code_challenge_method: "S256",
      limit: "2.5",
      usage_limit_type: "monthly",
      key_label: "Chat app",
    });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const csp = page.headers.get("content-security-policy")!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("form-action 'self' https://app.example");
    expect(csp).toContain("frame-ancestors 'none'");
    const html = await page.text();
    expect(html).not.toContain("<script");
    expect(html).toContain('value="approve">Approve</button>');
    expect(html).toContain('value="deny">Deny</button>');
    const fields = formFields(html);
    expect(fields).toMatchObject({ callback_url: CALLBACK, code_challenge: challenge, code_challenge_method: "S256", limit: "2.5", account: "mock-user" });

    const approved = await submit(mock, fields, "approve", pageCookie(page));
    expect(approved.status).toBe(303);
    const location = approved.headers.get("location")!;
    // The callback's own query (the caller's state) is kept byte for byte; the code is added.
    expect(location).toStartWith(`${CALLBACK}&code=`);
    const code = new URL(location).searchParams.get("code")!;
    expect(code).toMatch(/^auth_code_[A-Za-z0-9_-]+$/);

    const response = await exchange(mock, { code, code_verifier: verifier, code_challenge_method: "S256" });
    expect(response.status).toBe(200);
    const { key, user_id } = (await response.json()) as any;
    expect(key).toMatch(/^sk-or-v1-[0-9a-f]{64}$/);
    expect(user_id).toMatch(/^user_[A-Za-z0-9]{27}$/);

    const before = await keyInfo(mock, key);
    expect(before).toMatchObject({ label: "Chat app", limit: 2.5, limit_remaining: 2.5, limit_reset: "monthly", usage: 0, creator_user_id: user_id });
    const result = await paidChat(mock, key, "openai/gpt-4o", "hello [[mock tokens=9]]");
    const cost = mock.served.at(-1)!.costUsd;
    expect(cost).toBeGreaterThan(0);
    expect(result.usage.cost).toBe(cost);
    const after = await keyInfo(mock, key);
    expect(after).toMatchObject({ usage: cost, usage_daily: cost, usage_weekly: cost, usage_monthly: cost });
    expect(after.limit_remaining).toBeCloseTo(2.5 - cost, 12);
    expect(mock.keys.get(key)).toMatchObject({ kind: "user", userId: user_id });
  });

  test("the operator's key is not billed for a user's calls, nor the user's for the operator's", async () => {
    const mock = createMockUpstream();
    await paidChat(mock, OPERATOR, "openai/gpt-4o-mini", "operator [[mock tokens=3]]");
    const operatorCost = mock.served.at(-1)!.costUsd;
    const { key } = await connectUser(mock);
    await paidChat(mock, key, "openai/gpt-4o-mini", "user [[mock tokens=5]]");
    expect((await keyInfo(mock, key)).usage).toBe(mock.served.at(-1)!.costUsd);
    expect((await keyInfo(mock, OPERATOR)).usage).toBe(operatorCost);
  });

  test("the user may change the limit on the page; the account named there owns the key", async () => {
    const mock = createMockUpstream();
    const first = await connectUser(mock, { limit: "5" }, { limit: "0.01", account: "alice" });
    expect(await keyInfo(mock, first.key)).toMatchObject({ limit: 0.01, limit_reset: null });
    const again = await connectUser(mock, {}, { account: "alice" });
    expect(again.user_id).toBe(first.user_id);
    expect(again.key).not.toBe(first.key);
    expect((await keyInfo(mock, again.key)).limit).toBeNull();
    expect((await connectUser(mock, {}, { account: "bob" })).user_id).not.toBe(first.user_id);
  });

  test("plain challenges, and flows without a challenge, as the spec allows", async () => {
    const mock = createMockUpstream();
    const { verifier } = pkcePair();
    const plain = await approvedCode(mock, { code_challenge: verifier, code_challenge_method: "plain" });
    expect((await exchange(mock, { code: plain, code_verifier: verifier, code_challenge_method: "plain" })).status).toBe(200);
    const bare = await approvedCode(mock, {});
    expect((await exchange(mock, { code: bare })).status).toBe(200);
  });
});

describe("refused exchanges (the code is burned by the first exchange that names it)", () => {
  test("S256 with a wrong verifier: 403, and the right verifier cannot use the code after it", async () => {
    const mock = createMockUpstream();
    const { verifier, challenge } = pkcePair();
    const code = await approvedCode(mock, { code_challenge: challenge, code_challenge_method: "S256" });
    expect(await refusedExchange(mock, { code, code_verifier: pkcePair().verifier, code_challenge_method: "S256" })).toEqual({
      status: 403,
      message: "Invalid code_verifier",
    });
    expect(await refusedExchange(mock, { code, code_verifier: verifier, code_challenge_method: "S256" })).toMatchObject({ status: 400 });
  });

  test("a reused code: 400 the second time", async () => {
    const mock = createMockUpstream();
    const { verifier, challenge } = pkcePair();
    const code = await approvedCode(mock, { code_challenge: challenge, code_challenge_method: "S256" });
    expect((await exchange(mock, { code, code_verifier: verifier, code_challenge_method: "S256" })).status).toBe(200);
    expect(await refusedExchange(mock, { code, code_verifier: verifier, code_challenge_method: "S256" })).toEqual({
      status: 400,
      message: "Invalid code: unknown or already used",
    });
  });

  test("a code expires 10 minutes after it was made, on the mock's clock", async () => {
    let clock = Date.UTC(2026, 0, 15, 12);
    const mock = createMockUpstream({ now: () => clock });
    const early = pkcePair();
    const late = pkcePair();
    const lastMoment = await approvedCode(mock, { code_challenge: early.challenge, code_challenge_method: "S256" });
    const expired = await approvedCode(mock, { code_challenge: late.challenge, code_challenge_method: "S256" });
    clock += CODE_LIFETIME_MS - 1;
    expect((await exchange(mock, { code: lastMoment, code_verifier: early.verifier })).status).toBe(200);
    clock += 1;
    expect(await refusedExchange(mock, { code: expired, code_verifier: late.verifier })).toEqual({ status: 400, message: "Invalid code: expired" });
  });

  test("a method other than the code's, a missing or malformed verifier: 400, and the code is burned", async () => {
    const mock = createMockUpstream();
    const { verifier, challenge } = pkcePair();
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ code_verifier: verifier, code_challenge_method: "plain" }, "Invalid code_challenge_method"],
      [{ code_challenge_method: "S256" }, "code_verifier is missing or malformed"],
      [{ code_verifier: "too-short" }, "code_verifier is missing or malformed"],
    ];
    for (const [body, message] of cases) {
      const code = await approvedCode(mock, { code_challenge: challenge, code_challenge_method: "S256" });
      expect(await refusedExchange(mock, { code, ...body })).toEqual({ status: 400, message });
      expect((await exchange(mock, { code, code_verifier: verifier })).status).toBe(400);
    }
  });

  test("a body not of the spec's shape is a 400 that burns nothing", async () => {
    const mock = createMockUpstream();
    const { verifier, challenge } = pkcePair();
    const code = await approvedCode(mock, { code_challenge: challenge, code_challenge_method: "S256" });
    expect(await refusedExchange(mock, { code, code_verifier: verifier, code_challenge_method: "S512" })).toEqual({
      status: 400,
      message: "Invalid code_challenge_method",
    });
    expect(await refusedExchange(mock, { code_verifier: verifier })).toEqual({ status: 400, message: "code is required" });
    expect((await exchange(mock, { code, code_verifier: verifier })).status).toBe(200);
  });
});

describe("the /auth page", () => {
  test("Deny redirects with error=access_denied and makes no code", async () => {
    const mock = createMockUpstream();
    const page = await authPage(mock, { callback_url: CALLBACK, code_challenge: pkcePair().challenge, code_challenge_method: "S256" });
    const denied = await submit(mock, formFields(await page.text()), "deny", pageCookie(page));
    expect(denied.status).toBe(303);
    expect(denied.headers.get("location")).toBe(`${CALLBACK}&error=access_denied`);
  });

  test("a callback URL the spec does not allow gets a 400 page and no redirect", async () => {
    const mock = createMockUpstream();
    const challenge = pkcePair().challenge;
    for (const callback of ["http://app.example/cb", "javascript:alert(1)", "https://app.example/cb#frag", "not a url", ""]) {
      const page = await authPage(mock, { callback_url: callback, code_challenge: challenge, code_challenge_method: "S256" });
      expect(page.status).toBe(400);
      expect(page.headers.get("location")).toBeNull();
      const forged = await submit(mock, { callback_url: callback, code_challenge: challenge, code_challenge_method: "S256" }, "approve");
      expect(forged.status).toBe(400);
    }
    for (const callback of ["http://localhost:5173/cb", "http://127.0.0.1:8787/cb?state=x", "https://app.example:8443/cb"]) {
      expect((await authPage(mock, { callback_url: callback })).status).toBe(200);
    }
  });

  test("the form carries a CSRF token of its own: a POST without this browser's cookie, or with another page's, is a 403 page, no code", async () => {
    const mock = createMockUpstream();
    const query = { callback_url: CALLBACK, code_challenge: pkcePair().challenge, code_challenge_method: "S256" };
    const page = await authPage(mock, query);
    // HttpOnly, SameSite=Strict, no Path (the page's own folder), as long as a code lives.
    expect(page.headers.get("set-cookie")).toMatch(/^mock_auth_csrf=[A-Za-z0-9_-]{43}; Max-Age=600; HttpOnly; SameSite=Strict$/);
    const fields = formFields(await page.text());
    expect(fields.csrf_token).toBe(pageCookie(page).slice("mock_auth_csrf=".length));
    const other = await authPage(mock, query);
    const otherFields = formFields(await other.text());
    const { csrf_token: _token, ...withoutToken } = fields;
    // A cross-site form: the fields an attacker knows, with no cookie, or the attacker's own page's pair in one half.
    for (const [form, cookie] of [
      [fields, ""],
      [withoutToken, pageCookie(page)],
      [fields, pageCookie(other)],
      [otherFields, pageCookie(page)],
      [{ ...fields, csrf_token: "" }, "mock_auth_csrf="],
    ] as const) {
      for (const decision of ["approve", "deny"] as const) {
        const refused = await submit(mock, form, decision, cookie);
        expect(refused.status).toBe(403);
        expect(refused.headers.get("location")).toBeNull();
      }
    }
    // The browser that was shown the page gets its redirect, and the token is spent with it.
    const approved = await submit(mock, fields, "approve", pageCookie(page));
    expect(approved.status).toBe(303);
    expect(approved.headers.get("set-cookie")).toBe("mock_auth_csrf=; Max-Age=0; HttpOnly; SameSite=Strict");
  });

  test("given callback origins, the page sends browsers back only there: any other origin is a 400 page, GET or POST", async () => {
    const mock = createMockUpstream({ authCallbackOrigins: ["https://app.example"] });
    const challenge = pkcePair().challenge;
    for (const callback of ["https://evil.example/cb", "https://app.example.evil.example/cb", "https://app.example:8443/cb", "http://localhost:8787/cb"]) {
      const page = await authPage(mock, { callback_url: callback, code_challenge: challenge, code_challenge_method: "S256" });
      expect(page.status).toBe(400);
      expect(await page.text()).toContain("callback_url must be on https://app.example");
      const forged = await submit(mock, { callback_url: callback, code_challenge: challenge, code_challenge_method: "S256" }, "approve");
      expect({ status: forged.status, location: forged.headers.get("location") }).toEqual({ status: 400, location: null });
    }
    expect((await authPage(mock, { callback_url: CALLBACK })).status).toBe(200);
  });

  test("bad challenges and key settings get a 400 page", async () => {
    const mock = createMockUpstream();
    const bad: Array<Record<string, string>> = [
      { code_challenge: "short", code_challenge_method: "S256" },
      { code_challenge: pkcePair().challenge, code_challenge_method: "S512" },
      { code_challenge_method: "S256" },
      { limit: "-1" },
      { limit: "lots" },
      { usage_limit_type: "yearly" },
      { key_label: "x".repeat(101) },
    ];
    for (const query of bad) expect((await authPage(mock, { callback_url: CALLBACK, ...query })).status).toBe(400);
  });

  test("what the page shows is escaped", async () => {
    const mock = createMockUpstream();
    const page = await authPage(mock, { callback_url: CALLBACK, key_label: '"><script>alert(1)</script>' });
    const html = await page.text();
    expect(html).not.toContain("<script");
    expect(formFields(html).key_label).toBe('"><script>alert(1)</script>');
  });
});

describe("POST /auth/keys/code", () => {
  test("makes a code for the caller's account, exchanged like the page's", async () => {
    const mock = createMockUpstream();
    const { verifier, challenge } = pkcePair();
    const request = (authorization: Record<string, string>) =>
      mock.fetch(
        new Request(`${BASE}/auth/keys/code`, {
          method: "POST",
          headers: { "content-type": "application/json", ...authorization },
          body: JSON.stringify({
            callback_url: "https://app.example/cb",
            code_challenge: challenge,
            code_challenge_method: "S256",
            limit: 3,
            usage_limit_type: "daily",
          }),
        }),
      );
    const unauthenticated = await request({});
    expect(unauthenticated.status).toBe(401);
    expect(validateKeyEndpointError("/auth/keys/code", await unauthenticated.json(), 401)).toEqual([]);

    const created = await request({ authorization: `Bearer ${OPERATOR}` });
    const body = (await created.json()) as any;
    expect(created.status).toBe(200);
    expect(validateAuthKeysCode(body)).toEqual([]);
    const exchanged = await exchange(mock, { code: body.data.id, code_verifier: verifier, code_challenge_method: "S256" });
    const { key, user_id } = (await exchanged.json()) as any;
    expect(user_id).toBe(mock.keys.get(OPERATOR)!.userId);
    expect(await keyInfo(mock, key)).toMatchObject({ limit: 3, limit_reset: "daily" });
  });
});
