/**
 * `@metered-proxy/client/server` against a real server process (demo mode: the built-in
 * mock upstream) and an app created with the operator CLI: each function, the `openai`
 * client `chat()` presets (JSON and streaming), and the typed errors as the service really
 * sends them, thrown as they are by the chat calls. The user's approval is the browser's
 * step, done here over HTTP with the session token createSession returned.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type OpenAI from "openai";
import {
  AuthError,
  BudgetExceededError,
  createServerClient,
  InvalidRequestError,
  NotConnectedError,
  ProxyError,
  ProxyUnreachableError,
  RateLimitedError,
  toProxyError,
  type ServerClient,
} from "../../packages/client/src/server";
import { cliCreateApp, freePort, startServer, tempDatabase, type RunningServer } from "../helpers/server";

// Real server processes; bun's default test timeout is 5 s.
setDefaultTimeout(60_000);

const MODEL = "openai/gpt-4o-mini";
/** Per app and user in 60 s: low, so that a 429 comes after a few calls. */
const CHAT_RATE_LIMIT = 5;
const HELLO = [{ role: "user" as const, content: "Say hello" }];

const db = tempDatabase();
let server: RunningServer;
let app: { appId: string; secretKey: string };
let client: ServerClient;

beforeAll(async () => {
  app = await cliCreateApp(db.databaseUrl, "client library");
  server = await startServer({ databaseUrl: db.databaseUrl, env: { RL_CHAT_LIMIT: String(CHAT_RATE_LIMIT) } });
  client = createServerClient({ baseUrl: server.baseUrl, secretKey: app.secretKey });
});
afterAll(async () => {
  await server?.stop();
  db.cleanup();
});

/** The browser's step: approve the session's requested cap with the session token (POST /connections). */
async function approve(token: string): Promise<void> {
  const res = await server.fetch("/api/v1/connections", {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: "{}",
  });
  expect(res.status).toBe(200);
}

async function connect(appUserId: string, monthlyUsd: number): Promise<void> {
  await approve((await client.createSession({ appUserId, requestLimit: { monthlyUsd } })).token);
}

/** What a chat call threw, which must be our typed error as it is, with the answer's request id. */
async function proxyErrorOf(call: Promise<unknown>): Promise<ProxyError> {
  try {
    await call;
  } catch (err) {
    if (!(err instanceof ProxyError)) throw err;
    expect(err.requestId).toMatch(/\S/);
    // Code written for 0.1 converted it itself: toProxyError hands back the same error.
    expect(toProxyError(err)).toBe(err);
    return err;
  }
  throw new Error("expected the call to fail");
}

describe("server client against a real server", () => {
  test("createSession: a token the browser approves with; getStatus before and after", async () => {
    const before = await client.getStatus("alice");
    expect(before.connected).toBe(false);
    const session = await client.createSession({ appUserId: "alice", requestLimit: { monthlyUsd: 5 } });
    expect(session.token.split(".")).toHaveLength(3);
    expect(session.expiresAt).toBeGreaterThan(Date.now() / 1000);
    await approve(session.token);
    const status = await client.getStatus("alice");
    expect(status).toMatchObject({ connected: true, limits: { monthlyUsd: 5 }, usage: { monthlyUsd: 0 }, remainingUsd: 5 });
    expect(status.resetsAt).toBe(status.period.end);
  });

  test("chat({ user }) JSON through the preset openai client; listUsage shows its row under the same request id", async () => {
    const completion = await client.chat({ user: "alice" }).chat.completions.create({ model: MODEL, messages: HELLO });
    expect(completion.choices[0]!.message.content).toBeTruthy();
    const page = await client.listUsage("alice");
    expect(page.period).toMatch(/^\d{4}-\d{2}$/);
    expect(page.nextCursor).toBeNull();
    expect(page.data).toHaveLength(1);
    expect(page.data[0]).toMatchObject({ requestId: completion._request_id!, model: MODEL, streamed: false, status: "ok" });
    expect(page.data[0]!.costUsd).toBeGreaterThan(0);
    expect((await client.getStatus("alice")).usage.monthlyUsd).toBe(page.data[0]!.costUsd);
  });

  test("chat({ user }) streaming: every chunk, a final usage chunk, and a streamed row", async () => {
    const stream = await client.chat({ user: "alice" }).chat.completions.create({ model: MODEL, messages: HELLO, stream: true });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBeTruthy();
    const usage = chunks[chunks.length - 1]!.usage;
    expect(usage?.completion_tokens).toBeGreaterThan(0);
    const newest = (await client.listUsage("alice")).data[0]!;
    expect(newest).toMatchObject({ streamed: true, status: "ok", completionTokens: usage!.completion_tokens });
  });

  test("listUsage pages with limit and cursor, newest first", async () => {
    const all = await client.listUsage("alice");
    expect(all.data).toHaveLength(2);
    const first = await client.listUsage("alice", { limit: 1 });
    expect(first.data.map((r) => r.requestId)).toEqual([all.data[0]!.requestId]);
    expect(first.nextCursor).not.toBeNull();
    const second = await client.listUsage("alice", { limit: 1, cursor: first.nextCursor! });
    expect(second.data.map((r) => r.requestId)).toEqual([all.data[1]!.requestId]);
    expect(second.nextCursor).toBeNull();
  });

  test("a user id outside plain ASCII, or with % in it: the session's user is the one chat() pays with, JSON and streamed", async () => {
    for (const appUserId of ["josé 日本", "50%off", "emoji 🦊"]) {
      await connect(appUserId, 1);
      const openai = client.chat({ user: appUserId });
      await openai.chat.completions.create({ model: MODEL, messages: HELLO, max_tokens: 20 });
      const stream = await openai.chat.completions.create({ model: MODEL, messages: HELLO, max_tokens: 20, stream: true });
      for await (const chunk of stream) expect(chunk).toBeDefined();
      expect((await client.listUsage(appUserId)).data.map((r) => r.status)).toEqual(["ok", "ok"]);
      expect((await client.getStatus(appUserId)).usage.monthlyUsd).toBeGreaterThan(0);
    }
    // Past the service's 256 bytes: refused at the session, named; a lone surrogate is refused by the library itself.
    const tooLong = await client.createSession({ appUserId: "é".repeat(129) }).catch((e: unknown) => e);
    expect(tooLong).toMatchObject({ code: "invalid_request", message: "body.appUserId: must be at most 256 bytes of UTF-8" });
    expect(() => client.chat({ user: "\ud800" })).toThrow(TypeError);
  });

  test("a bad period: InvalidRequestError", async () => {
    const err = await client.listUsage("alice", { period: "last month" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidRequestError);
    expect(err).toMatchObject({ code: "invalid_request", status: 400 });
  });

  test("a user who never approved: NotConnectedError thrown by the chat call, JSON and streamed", async () => {
    const openai = client.chat({ user: "stranger" });
    const json = await proxyErrorOf(openai.chat.completions.create({ model: MODEL, messages: HELLO }));
    expect(json).toBeInstanceOf(NotConnectedError);
    expect(json).toMatchObject({ code: "not_connected", status: 402 });
    const streamed = await proxyErrorOf(openai.chat.completions.create({ model: MODEL, messages: HELLO, stream: true }));
    expect(streamed).toBeInstanceOf(NotConnectedError);
  });

  test("the SDK's .stream() helper wraps our error in its own, with ours as cause: toProxyError unwraps it", async () => {
    const helper = client.chat({ user: "stranger" }).chat.completions.stream({ model: MODEL, messages: HELLO });
    const err = await helper.finalChatCompletion().catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(ProxyError);
    expect(toProxyError(err)).toBeInstanceOf(NotConnectedError);
    expect(toProxyError(err)).toBe((err as { cause?: unknown }).cause as ProxyError);
  });

  test("a small cap, calls until refused: BudgetExceededError with the budget's numbers", async () => {
    await connect("frugal", 0.001);
    const openai = client.chat({ user: "frugal" }, { maxRetries: 0 });
    // gpt-4o at $10 per million completion tokens: 100 tokens are the whole $0.001, so the
    // first call is shrunk to what the cap affords and a later one cannot get even a minimal completion.
    const body = { model: "openai/gpt-4o", max_tokens: 100, messages: [{ role: "user" as const, content: "Tell me more [[mock tokens=100]]" }] };
    let refusal: unknown = null;
    let served = 0;
    for (let call = 0; call < CHAT_RATE_LIMIT - 1 && !refusal; call++) {
      try {
        await openai.chat.completions.create(body);
        served++;
      } catch (err) {
        refusal = err;
      }
    }
    expect(served).toBeGreaterThanOrEqual(1);
    expect(refusal).toBeInstanceOf(BudgetExceededError);
    const budget = refusal as BudgetExceededError;
    const status = await client.getStatus("frugal");
    expect(budget).toMatchObject({ code: "budget_exceeded", status: 402, limitUsd: 0.001, resetsAt: status.resetsAt });
    expect(budget.usedUsd).toBeGreaterThan(0);
    expect(budget.usedUsd + budget.remainingUsd).toBeLessThanOrEqual(0.001);
    expect(budget.requestId).toMatch(/\S/);
  });

  test("past RL_CHAT_LIMIT calls: RateLimitedError with retryAfter from Retry-After", async () => {
    await connect("busy", 5);
    const openai = client.chat({ user: "busy" }, { maxRetries: 0 });
    for (let i = 0; i < CHAT_RATE_LIMIT; i++)
      await openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi [[mock tokens=1]]" }] });
    const err = await proxyErrorOf(openai.chat.completions.create({ model: MODEL, messages: HELLO }));
    expect(err).toBeInstanceOf(RateLimitedError);
    expect(err).toMatchObject({ code: "rate_limited", status: 429 });
    const { retryAfter } = err as RateLimitedError;
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
  });

  test("a wrong secret key: AuthError from the API calls and from chat", async () => {
    const wrong = createServerClient({ baseUrl: server.baseUrl, secretKey: `sk_live_${app.appId}_not-the-secret` });
    // Caught as each call starts: the three are in flight together, and one that failed
    // while an earlier one was still awaited would otherwise be an unhandled rejection.
    const calls = [wrong.getStatus("alice"), wrong.createSession({ appUserId: "alice" }), wrong.listUsage("alice")].map((call) =>
      call.catch((e: unknown) => e),
    );
    for (const call of calls) {
      const err = await call;
      expect(err).toBeInstanceOf(AuthError);
      expect(err).toMatchObject({ code: "auth", status: 401, requestId: expect.stringMatching(/\S/) });
    }
    const err = await proxyErrorOf(wrong.chat({ user: "alice" }, { maxRetries: 0 }).chat.completions.create({ model: MODEL, messages: HELLO }));
    expect(err).toBeInstanceOf(AuthError);
  });
});

test("a service that does not answer: ProxyUnreachableError naming the address and what to check, with fetch's error as its cause", async () => {
  // A port nothing listens on.
  const nowhere = createServerClient({ baseUrl: `http://127.0.0.1:${freePort()}`, secretKey: app.secretKey });
  const failed = await nowhere.getStatus("alice").catch((err: unknown) => err);
  expect(failed).toBeInstanceOf(ProxyUnreachableError);
  expect(failed).not.toBeInstanceOf(ProxyError);
  const err = failed as ProxyUnreachableError;
  expect(err.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/v1\/status$/);
  expect(err.message).toStartWith(`could not reach the metered proxy at ${err.url} (`);
  expect(err.message).toEndWith("Is the service running at the baseUrl given to createServerClient?");
  expect(err.cause).toBeInstanceOf(Error);
  // An abort the caller asked for stays what it was.
  const aborting = createServerClient({
    baseUrl: server.baseUrl,
    secretKey: app.secretKey,
    fetch: (input, init) => fetch(input, { ...init, signal: AbortSignal.abort() }),
  });
  expect(((await aborting.getStatus("alice").catch((e: unknown) => e)) as Error).name).toBe("AbortError");
});
