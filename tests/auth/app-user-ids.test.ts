/**
 * An app's user id is held to one rule wherever it enters (src/auth/app-user-id.ts): 1 to 256
 * bytes of UTF-8, well-formed, no control characters. POST /sessions (the body), the session
 * token's subject (so /connections), the chat header `x-service-user` (percent-encoded, since
 * header values are bytes) and the backend's reads refuse the same ids, with 400
 * `invalid_request` naming the field (401 for a token). So an id approved through /sessions
 * is one chat can name, and a 12 KB header is refused before it is used as a key.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { SignJWT } from "jose";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";
import { TEST_JWT_SECRET } from "../helpers/test-app";

const MODEL = "openai/gpt-4o-mini";
const ask = { model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 20 };
const json = async (r: Response): Promise<any> => r.json();

let t: ChatTestApp;
beforeAll(async () => {
  t = await chatTestApp({ env: { JWT_SECRET: TEST_JWT_SECRET, RL_CHAT_LIMIT: "100000", RL_SESSIONS_LIMIT: "100000" } });
});

const sessions = (appUserId: unknown) =>
  t.app.handle(
    new Request("http://localhost/api/v1/sessions", {
      method: "POST",
      headers: { authorization: `Bearer ${t.secretKey}`, "content-type": "application/json" },
      body: JSON.stringify({ appUserId, requestLimit: { monthlyUsd: 5 } }),
    }),
  );
const withSession = (token: string, init: RequestInit = {}) =>
  t.app.handle(
    new Request("http://localhost/api/v1/connections", { ...init, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } }),
  );

async function refused(res: Response, status: number, message: string | RegExp): Promise<void> {
  const body = await json(res);
  expect({ status: res.status, code: body.error.code }).toEqual({ status, code: status === 400 ? "invalid_request" : "auth" });
  expect(body.error.message).toMatch(message);
}

/** 256 bytes of UTF-8 in 128 characters, and one character more. */
const AT_LIMIT = "é".repeat(128);
const PAST_LIMIT = "é".repeat(129);

describe("POST /sessions", () => {
  test("an id past 256 bytes of UTF-8 (under 256 characters), with a control character or a lone surrogate: 400 naming body.appUserId", async () => {
    await refused(await sessions(PAST_LIMIT), 400, /^body\.appUserId: must be at most 256 bytes of UTF-8$/);
    await refused(await sessions("🦊".repeat(65)), 400, /^body\.appUserId: must be at most 256 bytes/);
    await refused(await sessions("a\u0000b"), 400, /^body\.appUserId: must not contain control characters$/);
    await refused(await sessions("line\nbreak"), 400, /^body\.appUserId: must not contain control characters$/);
    await refused(await sessions("half \ud83e"), 400, /^body\.appUserId: must be valid Unicode/);
    expect((await sessions(AT_LIMIT)).status).toBe(200);
  });
});

describe("x-service-user on chat", () => {
  test("a 12 KB id: 400 naming the header, not a lookup of it", async () => {
    const res = await t.chat(ask, { "x-service-user": "x".repeat(12 * 1024) });
    await refused(res, 400, /^x-service-user: must be at most 256 bytes of UTF-8$/);
    expect(t.logs.join("\n")).not.toContain("x".repeat(300));
  });

  test("bytes outside ASCII (raw UTF-8, read back as Latin-1) or a broken escape: 400 saying how to send it", async () => {
    // What a server reads of "josé" sent as raw UTF-8 bytes.
    await refused(await t.chat(ask, { "x-service-user": "jos\u00c3\u00a9" }), 400, /^x-service-user: must be ASCII: send the id's UTF-8 bytes percent-encoded/);
    await refused(await t.chat(ask, { "x-service-user": "50%off" }), 400, /^x-service-user: is not well-formed percent-encoded UTF-8/);
    // %C3 alone is not UTF-8.
    await refused(await t.chat(ask, { "x-service-user": "jos%C3" }), 400, /^x-service-user: is not well-formed/);
    await refused(await t.chat(ask, { "x-service-user": "a%00b" }), 400, /^x-service-user: must not contain control characters$/);
    await refused(await t.chat(ask, { "x-service-user": encodeURIComponent(PAST_LIMIT) }), 400, /^x-service-user: must be at most 256 bytes/);
  });

  test("an id outside ASCII approved through /sessions is the one chat names, percent-encoded; plain ASCII ids as they are", async () => {
    for (const id of ["josé 日本", "50%off", AT_LIMIT, "plain-ascii_id@example.com"]) {
      const { token } = await json(await sessions(id));
      const approved = await withSession(token, { method: "POST", body: "{}" });
      expect({ status: approved.status, appUserId: (await json(approved)).appUserId }).toEqual({ status: 200, appUserId: id });
      const answer = await t.chat(ask, { "x-service-user": encodeURIComponent(id) });
      expect(answer.status).toBe(200);
      await answer.text();
    }
    // An ASCII id needs no encoding.
    expect((await t.chat(ask, { "x-service-user": "plain-ascii_id@example.com" })).status).toBe(200);
    await t.flush();
    const users = t.db.query<{ u: string }, []>("SELECT DISTINCT app_user_id AS u FROM usage_ledger ORDER BY u").all();
    expect(users.map((r) => r.u).sort()).toEqual(["josé 日本", "50%off", AT_LIMIT, "plain-ascii_id@example.com"].sort());
  });
});

describe("the session token's subject and the backend's reads", () => {
  test("a signed token whose subject breaks the rule (minted before it): 401 on /connections", async () => {
    const now = Math.floor(t.clock.now() / 1000);
    const key = (await t.deps.store.apps.activeKeysOf(t.appId))[0]!;
    for (const sub of ["x".repeat(12 * 1024), "a\u0000b"]) {
      const token = await new SignJWT({ app_id: t.appId, key_id: key.id })
        .setProtectedHeader({ alg: "HS256", typ: "session+jwt" })
        .setIssuer("metered-proxy")
        .setAudience("metered-proxy:connections")
        .setSubject(sub)
        .setIssuedAt(now)
        .setExpirationTime(now + 600)
        .setJti(crypto.randomUUID())
        .sign(new TextEncoder().encode(TEST_JWT_SECRET));
      await refused(await withSession(token), 401, /^invalid session token$/);
    }
  });

  test("/status and /usage refuse the same ids, naming query.appUserId", async () => {
    for (const path of ["/api/v1/status", "/api/v1/usage"]) {
      await refused(await t.get(`${path}?appUserId=${encodeURIComponent(PAST_LIMIT)}`), 400, /^query\.appUserId: must be at most 256 bytes/);
      await refused(await t.get(`${path}?appUserId=a%01b`), 400, /^query\.appUserId: must not contain control characters$/);
      expect((await t.get(`${path}?appUserId=${encodeURIComponent("josé 日本")}`)).status).toBe(200);
    }
  });
});
