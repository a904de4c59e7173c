import { Elysia, t } from "elysia";
import { Type } from "@sinclair/typebox";
import type { Config } from "../config";
import { ApiError } from "../errors";
import { ConsentError, type ConsentService } from "../services/grant-consent";
import { consentHeaders, renderConsentError, renderConsentPage } from "../pages/consent-page";
import { POPUP_SCRIPT } from "../pages/popup-script";
import { enforceRateLimit } from "../ratelimit/enforcement";
import type { RateLimiter, RateLimitRule } from "../ratelimit/rate-limiter";
import { randomString } from "../random";
import { errorResponses } from "../error-schema";
import { requestContextSlot } from "../request/elysia";
import { clientKey } from "../request/client-address";

export const ApproveConsentRequest = t.Object({ consentToken: t.String({ minLength: 10, maxLength: 128 }) });

const GrantMessage = t.Object({
  type: t.Literal("grant"),
  grantToken: t.String({ description: "`gt_…`: give it to your backend, which sends it as `x-service-grant`." }),
  grantId: t.String(),
  usd: t.Number(),
  maxUses: t.Nullable(Type.Integer()),
  expiresAt: t.String({ format: "date-time" }),
  state: t.String(),
  origin: t.String(),
});

const ConsentQuery = t.Object(
  {
    appId: t.Optional(t.String({ maxLength: 64 })),
    usd: t.Optional(t.String({ maxLength: 32 })),
    origin: t.Optional(t.String({ maxLength: 512 })),
    maxUses: t.Optional(t.String({ maxLength: 16 })),
    ttl: t.Optional(t.String({ maxLength: 16 })),
    state: t.Optional(t.String({ maxLength: 512 })),
  },
  { additionalProperties: true },
);

const htmlPage = (description: string) => ({ description, content: { "text/html": { schema: { type: "string" as const } } } });

/**
 * The consent popup of one-time grants: the page, its approval, and the browser helper that
 * opens it. Opening the page records a consent request row, so it is rate-limited per client
 * (its address, or behind a trusted proxy the forwarded one: src/request/client-address.ts);
 * a limited page is an error page (429 with Retry-After), never JSON, because a person reads
 * it. Only approvals also count per app: the page is anonymous, and a per-app count of
 * loads let a handful of strangers' addresses shut the app's real users out.
 */
export function consentRoutes(consent: ConsentService, rateLimiter: RateLimiter, rateLimits: Config["rateLimits"]) {
  const rules = {
    pagesPerAddress: { name: "consent-address", ...rateLimits.consentPerAddress },
    approvalsPerAddress: { name: "grants-address", ...rateLimits.grantsPerAddress },
    approvalsPerApp: { name: "grants-app", ...rateLimits.grantsPerApp },
  } satisfies Record<string, RateLimitRule>;

  /** enforceRateLimit for a page: its 429 becomes an error page that says who was limited. */
  const limitPage = async (rule: RateLimitRule, key: string, who: string, headers: Record<string, unknown>) => {
    try {
      await enforceRateLimit(rateLimiter, rule, key, headers);
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== "rate_limited") throw err;
      const retry = err.headers["retry-after"];
      throw new ConsentError(
        `Too many grant requests were opened ${who} in the last ${rule.windowMs / 1000} seconds. Try again in ${retry} seconds.`,
        429,
        err.headers,
      );
    }
  };

  return new Elysia({ prefix: "/grants" })
    .use(requestContextSlot)
    .get(
      "/consent",
      async ({ query, requestContext, set }) => {
        const nonce = randomString(24);
        Object.assign(set.headers, consentHeaders(nonce));
        try {
          // Before any lookup: bad parameters are attempts too.
          await limitPage(rules.pagesPerAddress, clientKey(requestContext.clientAddress), "from your network", set.headers);
          return renderConsentPage(await consent.offer(await consent.draft(query)), nonce);
        } catch (err) {
          if (!(err instanceof ConsentError)) throw err;
          set.status = err.status;
          Object.assign(set.headers, err.headers);
          return renderConsentError(err.message, nonce);
        }
      },
      {
        query: ConsentQuery,
        detail: {
          tags: ["grants"],
          summary: "The consent popup (HTML)",
          security: [],
          description:
            "Opened by popup.js with `appId`, `usd`, `origin` (the opener's, registered for the app), and optional `maxUses`, " +
            "`ttl` (seconds, default 86400, at most 30 days) and `state` (echoed back). Bad parameters render an error page (400); " +
            "so do a grant larger than the app's whole daily ceiling (402) and too many pages opened (429, Retry-After).",
          responses: {
            200: htmlPage("The consent page."),
            400: htmlPage("An error page: bad parameters."),
            402: htmlPage("An error page: the grant is larger than the app's daily ceiling on what grants spend."),
            429: htmlPage("An error page: too many consent pages opened from this address."),
          },
        },
      },
    )
    .post(
      "/consent",
      async ({ body, request, set, requestContext }) => {
        // Same-origin only: the consent page posts here; other sites' pages may not.
        const site = request.headers.get("sec-fetch-site");
        if (site !== null && site !== "same-origin") throw new ApiError("invalid_request", "grants are approved from the consent page only");
        // The client's own limit first: an attempt past it (or with a bad token) draws nothing from the app's.
        await enforceRateLimit(rateLimiter, rules.approvalsPerAddress, clientKey(requestContext.clientAddress), set.headers);
        const appId = await consent.appOfConsent(body.consentToken);
        if (!appId) throw new ApiError("invalid_request", "this consent page has expired or was already used; open it again");
        await enforceRateLimit(rateLimiter, rules.approvalsPerApp, appId, set.headers);
        set.headers["cache-control"] = "no-store";
        return consent.approve(body.consentToken);
      },
      {
        body: ApproveConsentRequest,
        response: { 200: GrantMessage, ...errorResponses(400, 413, 429) },
        detail: {
          tags: ["grants"],
          summary: "Approve a consent request (called by the consent page)",
          // The credential is the one-time consent token in the body.
          security: [],
          description:
            "Approving costs the app nothing: its daily ceiling on grant dollars counts what grants spend, and a chat call past it is 402 `budget_exceeded`.",
        },
      },
    )
    .get(
      "/popup.js",
      ({ set }) => {
        set.headers["content-type"] = "text/javascript; charset=utf-8";
        set.headers["cache-control"] = "public, max-age=300";
        // Apps include it from their own pages: let any origin load it.
        set.headers["cross-origin-resource-policy"] = "cross-origin";
        return POPUP_SCRIPT;
      },
      {
        detail: {
          tags: ["grants"],
          summary: "Browser helper: MeteredProxy.requestGrant({appId, usd, maxUses?, ttl?})",
          description:
            'The script an app page includes with a script element; call `MeteredProxy.requestGrant` from a click, since browsers block a popup a page opens by itself. It resolves with `{type: "grant", grantToken, usd, maxUses, expiresAt, state}`.',
          // Loaded by any page, with no credential.
          security: [],
          responses: { 200: { description: "JavaScript.", content: { "text/javascript": { schema: { type: "string" } } } } },
        },
      },
    );
}
