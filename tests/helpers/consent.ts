/** The consent popup's two requests, as popup.js and the consent page's own script send them, through app.handle. */
import { expect } from "bun:test";
import type { ChatTestApp } from "./chat-app";

export const CONSENT_ORIGIN = "http://localhost:3000";

/** GET /grants/consent for the test app ($1 from CONSENT_ORIGIN unless `params` say otherwise). */
export function openConsentPage(t: Pick<ChatTestApp, "app" | "appId">, params: Record<string, string> = {}): Promise<Response> {
  const query = new URLSearchParams({ appId: t.appId, usd: "1", origin: CONSENT_ORIGIN, state: "s1", ...params });
  return t.app.handle(new Request(`http://localhost/api/v1/grants/consent?${query}`));
}

/** The one-time token a consent page embeds for its script. */
export function consentTokenIn(html: string): string {
  const match = /"consentToken":"(ct_[0-9A-Za-z]+)"/.exec(html);
  if (!match) throw new Error("no consent token in the page");
  return match[1]!;
}

/** POST /grants/consent from the page itself (same origin). */
export function postApproval(t: Pick<ChatTestApp, "app">, consentToken: string): Promise<Response> {
  return t.app.handle(
    new Request("http://localhost/api/v1/grants/consent", {
      method: "POST",
      headers: { "content-type": "application/json", "sec-fetch-site": "same-origin" },
      body: JSON.stringify({ consentToken }),
    }),
  );
}

/** Opens the consent page and approves it; asserts both succeed. */

export async function obtainGrant(t: Pick<ChatTestApp, "app" | "appId">, params: Record<string, string> = {}): Promise<any> {
  const page = await openConsentPage(t, params);
  expect(page.status).toBe(200);
  const consentToken = consentTokenIn(await page.text());
  const res = await postApproval(t, consentToken);
  expect(res.status).toBe(200);
  return { ...((await res.json()) as object), consentToken };
}
