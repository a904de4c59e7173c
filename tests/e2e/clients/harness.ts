/**
 * Shared pieces of the client-library tests: a fetch that records every HTTP attempt a
 * library makes (so retries are counted, not guessed), and the ledger checks every library
 * must pass: one charged row per successful call at the mock's `usage.cost`, and no charge
 * at all for a failed one, however many times the library retried it.
 */
import { expect } from "bun:test";
import type { ServedRequest } from "../../../packages/mock-upstream/src";
import { nano, type ApiUsageRow, type ProxyStack } from "../../helpers/proxy-stack";

export const MODEL = "openai/gpt-4o-mini";
/** The mock's default completion is 16 tokens; `[[mock tokens=N]]` changes it. */
export const DEFAULT_COMPLETION_TOKENS = 16;

export interface Attempt {
  method: string;
  url: string;
  status: number;
  /** The Retry-After the proxy sent, before `fastRetry` rewrote it. */
  retryAfter: string | null;
}

export interface RecordingFetch {
  fetch: typeof fetch;
  attempts: Attempt[];
  /** Attempts made since index `from`, for one call. */
  since(from: number): Attempt[];
}

/**
 * A fetch for a library's `fetch` option that records each attempt. With `fastRetry`, 429
 * and 5xx answers get `retry-after-ms: 0` and `retry-after: 0`, headers openai, the AI SDK
 * and LangChain honour: it shortens their back-off (seconds, or the proxy's Retry-After of
 * up to a minute) without touching their decision to retry, so the count of attempts is
 * still the library's own.
 */
export function recordingFetch(options: { fastRetry?: boolean } = {}): RecordingFetch {
  const attempts: Attempt[] = [];
  const recorder = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = input instanceof Request ? input.url : String(input);
    const method = init?.method ?? (input instanceof Request ? input.method : "GET");
    const res = await fetch(input, init);
    attempts.push({ method, url, status: res.status, retryAfter: res.headers.get("retry-after") });
    if (!options.fastRetry || (res.status !== 429 && res.status < 500)) return res;
    const headers = new Headers(res.headers);
    headers.set("retry-after-ms", "0");
    headers.set("retry-after", "0");
    return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
  };
  return { fetch: recorder as typeof fetch, attempts, since: (from) => attempts.slice(from) };
}

/** RL_CHAT_LIMIT for the client stacks (per app and user, per 60 s): low, to reach a 429 quickly. */
export const CHAT_RATE_LIMIT = 4;

/** Uses up the user's RL_CHAT window with plain successful calls (the window is 60 s), and waits for their rows. */
export async function exhaustRateLimit(stack: ProxyStack, user: string): Promise<void> {
  const rows = (await stack.usage(user)).length;
  for (let i = 0; i < CHAT_RATE_LIMIT; i++) {
    const res = await stack.chat(user, { model: MODEL, messages: [{ role: "user", content: "hi [[mock tokens=1]]" }] });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  }
  await stack.waitForUsage(user, rows + CHAT_RATE_LIMIT);
}

/** What one user's ledger and budget look like right now, to compare after a call. */
export interface LedgerMark {
  user: string;
  rows: number;
  rowIds: Set<string>;
  served: number;
  spentUsd: number;
}

export async function mark(stack: ProxyStack, user: string): Promise<LedgerMark> {
  const [rows, status] = await Promise.all([stack.usage(user), stack.status(user)]);
  return { user, rows: rows.length, rowIds: new Set(rows.map((r) => r.requestId)), served: stack.mock.served.length, spentUsd: status.usage.monthlyUsd };
}

/**
 * A successful call: the mock served exactly one request, and the user has exactly one new
 * ledger row for it (same generation id) costing the mock's usage.cost, also in /status.
 */
export async function expectOneChargedCall(
  stack: ProxyStack,
  before: LedgerMark,
  expected: { stream: boolean },
): Promise<{ served: ServedRequest; row: ApiUsageRow }> {
  const served = stack.servedSince(before.served);
  expect(served).toHaveLength(1);
  const call = served[0]!;
  expect(call).toMatchObject({ status: 200, completed: true, stream: expected.stream });
  expect(call.costUsd).toBeGreaterThan(0);
  const rows = await stack.waitForUsage(before.user, before.rows + 1);
  expect(rows).toHaveLength(before.rows + 1);
  const row = rows.find((r) => r.generationId === call.id);
  expect(row).toBeDefined();
  expect(row).toMatchObject({
    status: "ok",
    source: "upstream",
    streamed: expected.stream,
    promptTokens: call.promptTokens,
    completionTokens: call.completionTokens,
  });
  expect(nano(row!.costUsd)).toBe(nano(call.costUsd));
  const status = await stack.status(before.user);
  expect(nano(status.usage.monthlyUsd)).toBe(nano(before.spentUsd) + nano(call.costUsd));
  return { served: call, row: row! };
}

/**
 * A refused call (402 before the upstream): the mock saw nothing and the ledger is unchanged.
 * A library that retried would show up as extra attempts; a 402 must be tried exactly once.
 */
export async function expectRefusedWithoutCharge(stack: ProxyStack, before: LedgerMark, attempts: Attempt[]): Promise<void> {
  expect(attempts.map((a) => a.status)).toEqual([402]);
  expect(stack.servedSince(before.served)).toHaveLength(0);
  const after = await mark(stack, before.user);
  expect(after.rows).toBe(before.rows);
  expect(nano(after.spentUsd)).toBe(nano(before.spentUsd));
}

/**
 * A rate-limited call (429 before the upstream): every attempt the library made was refused,
 * none reached the mock, the ledger is unchanged. Returns the number of attempts.
 */
export async function expectRateLimitedWithoutCharge(stack: ProxyStack, before: LedgerMark, attempts: Attempt[]): Promise<number> {
  expect(attempts.length).toBeGreaterThanOrEqual(1);
  expect(attempts.every((a) => a.status === 429)).toBe(true);
  // The proxy tells the client when to come back (RFC 9110 §10.2.3), in whole seconds.
  for (const a of attempts) expect(Number(a.retryAfter)).toBeGreaterThanOrEqual(1);
  expect(stack.servedSince(before.served)).toHaveLength(0);
  const after = await mark(stack, before.user);
  expect(after.rows).toBe(before.rows);
  expect(nano(after.spentUsd)).toBe(nano(before.spentUsd));
  return attempts.length;
}

/**
 * An upstream failure (502): each attempt the library made reached the mock once and left
 * one zero-cost row (the refund is recorded); the user's spend did not move.
 * Returns the number of attempts (1 + retries).
 */
export async function expectUpstreamFailureWithoutCharge(stack: ProxyStack, before: LedgerMark, attempts: Attempt[]): Promise<number> {
  expect(attempts.length).toBeGreaterThanOrEqual(1);
  expect(attempts.every((a) => a.status === 502)).toBe(true);
  const served = stack.servedSince(before.served);
  expect(served).toHaveLength(attempts.length);
  expect(served.every((s) => s.status === 500)).toBe(true);
  const rows = await stack.waitForUsage(before.user, before.rows + attempts.length);
  expect(rows).toHaveLength(before.rows + attempts.length);
  const fresh = rows.filter((r) => !before.rowIds.has(r.requestId));
  expect(fresh).toHaveLength(attempts.length);
  for (const row of fresh) expect(row).toMatchObject({ costUsd: 0, status: "upstream_500" });
  const after = await mark(stack, before.user);
  expect(nano(after.spentUsd)).toBe(nano(before.spentUsd));
  return attempts.length;
}

/** The mock's whole completion text for `tokens` tokens (see packages/mock-upstream/src/completion.ts). */
export { completionText } from "../../../packages/mock-upstream/src";
