import { Elysia, t } from "elysia";
import type { Guards } from "../http/guards";
import type { FundingLinkService } from "../services/funding-link";
import { FUNDING_FLOW_LIFETIME_MS } from "../services/funding-link";
import { consentHeaders } from "../pages/consent-page";
import { fundingResultData, renderFundingResult } from "../pages/funding-result";
import { randomString } from "../random";
import { errorResponses } from "../error-schema";
import { MonthlyUsd } from "./schemas";

export const FundingStartRequest = t.Object({ monthlyUsd: t.Optional(MonthlyUsd) });
const FundingStartAnswer = t.Object({
  authorizeUrl: t.String({ description: "The upstream's PKCE page to send the user to (the connect page opens it in a window of its own)." }),
});

const CallbackQuery = t.Object(
  { state: t.Optional(t.String({ maxLength: 256 })), code: t.Optional(t.String({ maxLength: 1024 })), error: t.Optional(t.String({ maxLength: 256 })) },
  { additionalProperties: true },
);

/**
 * The cookie that binds a flow to the browser that started it (RFC 6749 §10.12: a callback
 * must be tied to the user agent's own session, or an attacker could have a victim complete
 * the attacker's flow and link the victim's account to the attacker's connection). It holds
 * the starting session token's id; the flow's row holds the same, and a take needs both.
 * HttpOnly, SameSite=Lax (sent on the upstream's top-level redirect back), scoped to the
 * callback's path, and living as long as the flow. Set by the start, which the connect page
 * calls from the service's own origin (the start has no CORS), so PUBLIC_URL must be the
 * origin the connect page is served from.
 */
export const FUNDING_COOKIE = "mp_funding_session";

/** The callback's path under the API prefix: the upstream sends browsers here (PUBLIC_URL + prefix + this). */
export const FUNDING_CALLBACK_ROUTE = "/connect/funding/callback";

const html = (description: string) => ({ description, content: { "text/html": { schema: { type: "string" as const } } } });

/**
 * POST /connections/funding starts the PKCE flow that links the user's own upstream account
 * (src/services/funding-link.ts); GET /connect/funding/callback is where the upstream sends
 * the browser back. `callbackPath` is the callback's path as browsers see it (PUBLIC_URL's
 * prefix included), for the cookie's scope; `secureCookie` when PUBLIC_URL is https.
 */
export function fundingRoutes(funding: FundingLinkService, auth: Guards, cookie: { callbackPath: string; secure: boolean }) {
  const attributes = `HttpOnly; SameSite=Lax; Path=${cookie.callbackPath}${cookie.secure ? "; Secure" : ""}`;
  return new Elysia()
    .use(auth)
    .post(
      "/connections/funding",
      async ({ session, body, set }) => {
        const answer = await funding.start(session, body.monthlyUsd);
        set.status = 201;
        set.headers["set-cookie"] = `${FUNDING_COOKIE}=${session.jti}; Max-Age=${FUNDING_FLOW_LIFETIME_MS / 1000}; ${attributes}`;
        set.headers["cache-control"] = "no-store";
        return answer;
      },
      {
        session: true,
        // A write of the user's (and a stored flow): limited per user like /connections (RL_USER_WRITES).
        rateLimit: "userWrites",
        body: FundingStartRequest,
        response: { 201: FundingStartAnswer, ...errorResponses(400, 401, 413, 429) },
        detail: {
          tags: ["connections"],
          summary: "Start linking the user's own upstream account (PKCE)",
          description:
            "For apps whose `fundingSources` include `user`; otherwise 400. The cap is chosen as on POST /connections and becomes the " +
            "new key's monthly credit limit upstream. Answers the upstream's authorization page, which the connect page opens in a window of its own, and a " +
            "cookie binding the flow to this browser: call it from the connect page (the service's own origin). The flow lives 10 minutes; " +
            "the upstream sends the browser back to GET /connect/funding/callback.",
          security: [{ sessionToken: [] }],
        },
      },
    )
    .get(
      FUNDING_CALLBACK_ROUTE,
      async ({ query, request, set }) => {
        const result = await funding.complete(query, readCookie(request.headers.get("cookie"), FUNDING_COOKIE));
        const nonce = randomString(24);
        Object.assign(set.headers, consentHeaders(nonce));
        // The flow is spent whatever the outcome: its cookie goes with it.
        set.headers["set-cookie"] = `${FUNDING_COOKIE}=; Max-Age=0; ${attributes}`;
        set.status = result.outcome === "failed" ? result.httpStatus : 200;
        return renderFundingResult(fundingResultData(result), nonce);
      },
      {
        query: CallbackQuery,
        detail: {
          tags: ["connections"],
          summary: "Where the upstream's PKCE page sends the user back (HTML)",
          security: [],
          description:
            "Not called by apps. `state` (single use, 10 minutes, only from the browser that started it) with `code` links the key; " +
            "`error=access_denied` leaves the connection as it was. The page carries its outcome as JSON in " +
            "its script element of type application/json and id `funding-result`: " +
            '`{outcome: "connected", appId, monthlyUsd, resetsAt, fundingSource, keyFingerprint}`, ' +
            '`{outcome: "denied", appId}` or `{outcome: "failed", message}`.',
          responses: {
            200: html("Linked, or declined on the upstream's page."),
            400: html("Expired, used or foreign state, or a refused code."),
            502: html("The upstream could not be reached."),
          },
        },
      },
    );
}

/** One cookie's value from a Cookie header (RFC 6265 §5.4's `name=value; name=value`); null when absent. */
export function readCookie(header: string | null, name: string): string | null {
  for (const pair of (header ?? "").split(";")) {
    const eq = pair.indexOf("=");
    if (eq !== -1 && pair.slice(0, eq).trim() === name) return pair.slice(eq + 1).trim() || null;
  }
  return null;
}
