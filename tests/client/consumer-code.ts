/**
 * Code an app writes against the installed client library, compiled and run inside a
 * scratch app (scratch-app.ts) once per `openai` major the package supports. Kept as text:
 * it imports `@metered-proxy/client/…` as an app does, which resolves only there.
 */
import { expect } from "bun:test";
import { cliCreateApp, connectOverHttp, startServer, tempDatabase, type RunningServer } from "../helpers/server";

/** Type assertions an app relies on; each @ts-expect-error fails tsc if its type were `any`. */
export const TYPE_CHECKS = `
import OpenAI from "openai";
import {
  BudgetExceededError, createServerClient, ERROR_CODES, ProxyError, RateLimitedError,
  type CreateSessionInput, type ErrorCode, type UsageRow, type UserStatus, type WebhookEvent,
} from "@metered-proxy/client/server";

const client = createServerClient({ baseUrl: "http://localhost:8787", secretKey: "sk_live_x", fetch: globalThis.fetch });
export async function checks(): Promise<void> {
  const status: UserStatus = await client.getStatus("alice");
  const remaining: number = status.remainingUsd;
  const row: UsageRow | undefined = (await client.listUsage("alice", { limit: 10, cursor: "c", period: "2026-01" })).data[0];
  const session: { token: string; expiresAt: number } = await client.createSession({ appUserId: "alice", requestLimit: { monthlyUsd: 5 } });
  const openai: OpenAI = client.chat({ grant: "gt_x" }, { maxRetries: 0 });
  const codes: readonly ErrorCode[] = ERROR_CODES;
  console.log(remaining, row?.reservedUsd, session.token, openai.baseURL, codes);
  // @ts-expect-error the codes are a closed list
  const teapot: ErrorCode = "teapot";
  // @ts-expect-error a user id is a string
  await client.getStatus(42);
  // @ts-expect-error a payer is required
  client.chat({});
  // @ts-expect-error limitUsd is a number
  const limit: string = ({} as BudgetExceededError).limitUsd;
  // @ts-expect-error the API's name is requestLimit: { monthlyUsd }
  const misnamed: CreateSessionInput = { appUserId: "alice", requestLimit: 5 };
  console.log(teapot, limit, misnamed);
}
export function onError(err: unknown): number | null {
  if (err instanceof RateLimitedError) return err.retryAfter;
  if (err instanceof ProxyError) return err.status;
  return null;
}

// The browser entry, as an app's page uses it.
import { createBrowserClient, GrantDeniedError, PopupClosedError, type ConnectionStatus, type ConnectOutcome } from "@metered-proxy/client/browser";
const browserClient = createBrowserClient({ baseUrl: "http://localhost:8787", appId: "app1", getSessionToken: async () => "token" });
export async function browserChecks(): Promise<void> {
  const connection: ConnectionStatus = await browserClient.getConnection();
  const funding: "ok" | "invalid" = connection.fundingStatus;
  const outcome: ConnectOutcome = await browserClient.connect({ monthlyUsd: 5 });
  if (outcome.type === "connected") console.log(outcome.monthlyUsd.toFixed(2));
  const own = await browserClient.connect({ monthlyUsd: 5, funding: "user" });
  if (own.type === "connected") console.log(own.fundingSource === "user");
  // @ts-expect-error who pays is app or user
  await browserClient.connect({ funding: "card" });
  const grant = await browserClient.requestGrant({ usd: 1, maxUses: 3 });
  const token: string = grant.grantToken;
  console.log(funding, token, GrantDeniedError.name, PopupClosedError.name);
  // @ts-expect-error an outcome's type is one of three
  const wrong: ConnectOutcome["type"] = "approved";
  // @ts-expect-error the session token comes from a function
  createBrowserClient({ baseUrl: "x", appId: "a", getSessionToken: "token" });
  console.log(wrong);
}
export function onEvent(event: WebhookEvent): string {
  if (event.type === "grant.exhausted") return event.data.reason;
  // @ts-expect-error connection.revoked has no monthlyUsd
  if (event.type === "connection.revoked") return String(event.data.monthlyUsd);
  return event.type;
}
`;

/** What a page's example may use without declaring it: the button the README's example wires up. */
export const BROWSER_PRELUDE = "declare const button: HTMLButtonElement;\n";

/**
 * Chat calls through the installed package and the installed `openai`, against the server
 * at PROXY_URL: a JSON and a streamed answer, then the service's refusals, which must be
 * our classes as thrown (instanceof, no conversion), JSON and streamed; the SDK's
 * `.stream()` helper wraps ours, and toProxyError unwraps it. Prints one JSON line.
 */
export const CHAT_CALLS = `
import { BudgetExceededError, createServerClient, NotConnectedError, toProxyError } from "@metered-proxy/client/server";

// Node's and Bun's; the app is compiled without their type packages.
declare const process: { env: Record<string, string | undefined> };
const proxy = createServerClient({ baseUrl: process.env.PROXY_URL ?? "", secretKey: process.env.SECRET_KEY ?? "" });
const hello = { model: "openai/gpt-4o-mini", messages: [{ role: "user" as const, content: "Say hello" }] };

async function thrown(call: Promise<unknown>): Promise<unknown> {
  try {
    await call;
  } catch (err) {
    return err;
  }
  throw new Error("expected the call to fail");
}

const answer = await proxy.chat({ user: "funded" }).chat.completions.create(hello);
let streamedTokens = 0;
for await (const chunk of await proxy.chat({ user: "funded" }).chat.completions.create({ ...hello, stream: true })) {
  streamedTokens = chunk.usage?.completion_tokens ?? streamedTokens;
}
const stranger = proxy.chat({ user: "stranger" }, { maxRetries: 0 });
const strangerJson = await thrown(stranger.chat.completions.create(hello));
const strangerStream = await thrown(stranger.chat.completions.create({ ...hello, stream: true }));
const helper = await thrown(stranger.chat.completions.stream(hello).finalChatCompletion());
// Enough for the prompt, not for a minimal completion of gpt-4o.
const poor = await thrown(
  proxy.chat({ user: "poor" }, { maxRetries: 0 }).chat.completions.create({ model: "openai/gpt-4o", messages: [{ role: "user", content: "hi ".repeat(40) }] }),
);
console.log(JSON.stringify({
  answered: answer.choices[0]?.message.content ?? "",
  streamedTokens,
  strangerJson: strangerJson instanceof NotConnectedError,
  strangerStream: strangerStream instanceof NotConnectedError,
  helperUnwrapped: toProxyError(helper) instanceof NotConnectedError,
  poorLimitUsd: poor instanceof BudgetExceededError ? poor.limitUsd : String(poor),
}));
`;

/** A real server with an app whose users `funded` ($5), `poor` ($0.0001) and `alice` ($5) have approved. */
export async function serverWithUsers(): Promise<{ server: RunningServer; secretKey: string; stop(): Promise<void> }> {
  const db = tempDatabase();
  const { secretKey } = await cliCreateApp(db.databaseUrl, "scratch app");
  const server = await startServer({ databaseUrl: db.databaseUrl });
  for (const [user, usd] of [
    ["funded", 5],
    ["poor", 0.0001],
    ["alice", 5],
  ] as const)
    await connectOverHttp(server, secretKey, user, usd);
  return {
    server,
    secretKey,
    stop: async () => {
      await server.stop();
      db.cleanup();
    },
  };
}

/** What CHAT_CALLS printed, checked. */
export function expectChatCalls(stdout: string): void {
  const seen = JSON.parse(stdout.trim()) as Record<string, unknown>;
  expect(seen.answered).toEqual(expect.stringMatching(/\S/));
  expect(seen.streamedTokens).toBeGreaterThan(0);
  expect(seen).toMatchObject({ strangerJson: true, strangerStream: true, helperUnwrapped: true, poorLimitUsd: 0.0001 });
}

/** Checks what the README server examples print: `true 5` for Alice's status, her answer, then her newest row's cost. */
export function expectReadmeOutput(stdout: string): string[] {
  const lines = stdout.trim().split("\n");
  expect(lines[0]).toBe("true 5");
  expect(lines[1]).toBeTruthy();
  expect(Number(lines[2]!.split(" ")[0])).toBeGreaterThan(0);
  return lines;
}
