/**
 * Shared by the mock's PKCE and key tests: a verifier and its challenge, the /auth page and
 * its form as a browser would send it, the code exchange, chat calls with a given key, and
 * GET /key. Every answer is checked against the spec's schemas (tests/helpers/openrouter-spec).
 */
import { expect } from "bun:test";
import type { MockUpstream } from "../../packages/mock-upstream/src";
import { validateAuthKeys, validateChatCompletion, validateKey, validateKeyEndpointError } from "../helpers/openrouter-spec";

export const BASE = "http://mock.local/api/v1";
export const CALLBACK = "https://app.example/connect/callback?state=s%20t+1&x=";

/** A fresh PKCE pair (RFC 7636: 32 random bytes, base64url; the S256 challenge of it). */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64url");
  return { verifier, challenge: new Bun.CryptoHasher("sha256").update(verifier).digest("base64url") };
}

/** GET /auth with these query parameters (the page is at the site root, as on OpenRouter). */
export function authPage(mock: MockUpstream, query: Record<string, string>): Promise<Response> {
  return mock.fetch(new Request(`http://mock.local/auth?${new URLSearchParams(query)}`));
}

/** The hidden and text fields of the page's form, as a browser would submit them. */
export function formFields(html: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const [, name, value] of html.matchAll(/<input [^>]*name="([^"]+)"[^>]*value="([^"]*)"/g)) fields[name!] = unescapeHtml(value!);
  return fields;
}

function unescapeHtml(text: string): string {
  return text.replace(/&(amp|lt|gt|quot|#39);/g, (_, e: string) => ({ amp: "&", lt: "<", gt: ">", quot: '"', "#39": "'" })[e]!);
}

/** The `name=value` of the CSRF cookie a page's answer set, for the Cookie header of its form's POST (a browser's cookie jar). */
export function pageCookie(page: Response): string {
  const set = page.headers.get("set-cookie") ?? "";
  return set.slice(0, set.indexOf(";"));
}

/** Submits the page's form with one of its buttons (and field edits), with the cookie its page set; the answer is the mock's 303. */
export function submit(mock: MockUpstream, fields: Record<string, string>, decision: "approve" | "deny", cookie = ""): Promise<Response> {
  return mock.fetch(
    new Request("http://mock.local/auth", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...(cookie && { cookie }) },
      body: new URLSearchParams({ ...fields, decision }).toString(),
    }),
  );
}

/** Page, then Approve: the code from the redirect (query may set limit, usage_limit_type, key_label…). */
export async function approvedCode(mock: MockUpstream, query: Record<string, string>, edits: Record<string, string> = {}): Promise<string> {
  const page = await authPage(mock, { callback_url: CALLBACK, ...query });
  expect(page.status).toBe(200);
  const answer = await submit(mock, { ...formFields(await page.text()), ...edits }, "approve", pageCookie(page));
  expect(answer.status).toBe(303);
  const location = answer.headers.get("location")!;
  return new URL(location).searchParams.get("code")!;
}

export function exchange(mock: MockUpstream, body: Record<string, unknown>): Promise<Response> {
  return mock.fetch(new Request(`${BASE}/auth/keys`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }));
}

/** The whole flow with S256: a user key, checked against the spec's answer. */
export async function connectUser(
  mock: MockUpstream,
  query: Record<string, string> = {},
  edits: Record<string, string> = {},
): Promise<{ key: string; user_id: string }> {
  const { verifier, challenge } = pkcePair();
  const code = await approvedCode(mock, { code_challenge: challenge, code_challenge_method: "S256", ...query }, edits);
  const response = await exchange(mock, { code, code_verifier: verifier, code_challenge_method: "S256" });
  const body = (await response.json()) as any;
  expect({ status: response.status, body }).toMatchObject({ status: 200 });
  expect(validateAuthKeys(body)).toEqual([]);
  return body;
}

/** A failed exchange: its status, its body checked against that status's schema. */
export async function refusedExchange(mock: MockUpstream, body: Record<string, unknown>): Promise<{ status: number; message: string }> {
  const response = await exchange(mock, body);
  const answer = (await response.json()) as any;
  expect(validateKeyEndpointError("/auth/keys", answer, response.status)).toEqual([]);
  return { status: response.status, message: answer.error.message };
}

/** A JSON chat call with `key`; `text` may carry [[mock …]] directives. */
export function chat(mock: MockUpstream, key: string, model: string, text: string, extra: Record<string, unknown> = {}): Promise<Response> {
  return mock.fetch(
    new Request(`${BASE}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model, messages: [{ role: "user", content: text }], ...extra }),
    }),
  );
}

/** A chat call that must succeed; its ChatResult. */
export async function paidChat(mock: MockUpstream, key: string, model: string, text: string, extra: Record<string, unknown> = {}): Promise<any> {
  const response = await chat(mock, key, model, text, extra);
  const body = (await response.json()) as any;
  expect({ status: response.status, body }).toMatchObject({ status: 200 });
  expect(validateChatCompletion(body)).toEqual([]);
  return body;
}

/** GET /key with `key`: its `data`, checked against the spec. */
export async function keyInfo(mock: MockUpstream, key: string): Promise<any> {
  const response = await mock.fetch(new Request(`${BASE}/key`, { headers: { authorization: `Bearer ${key}` } }));
  const body = (await response.json()) as any;
  expect({ status: response.status, body }).toMatchObject({ status: 200 });
  expect(validateKey(body)).toEqual([]);
  return body.data;
}
