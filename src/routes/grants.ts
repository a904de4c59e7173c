import { Elysia, t } from "elysia";
import { Type } from "@sinclair/typebox";
import type { Deps } from "../deps";
import type { Guards } from "../http/guards";
import { ApiError } from "../errors";
import { ConsentError, type GrantService } from "../services/grants";
import { consentHeaders, renderConsentError, renderConsentPage } from "../grants/consent-page";
import { POPUP_SCRIPT } from "../grants/popup-script";
import { enforceRateLimit } from "../ratelimit/macro";
import { randomString } from "../random";
import { ErrorEnvelope, errorResponses } from "./models";

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

const GrantStatus = t.Object({
  grantId: t.String(),
  usdCap: t.Number(),
  usedUsd: t.Number(),
  remainingUsd: t.Number(),
  uses: Type.Integer(),
  maxUses: t.Nullable(Type.Integer()),
  expiresAt: t.String({ format: "date-time" }),
  status: t.Union([t.Literal("active"), t.Literal("expired"), t.Literal("revoked"), t.Literal("exhausted")]),
});

const grantHeader = (request: Request): string => {
  const token = request.headers.get("x-service-grant");
  if (!token) throw new ApiError("invalid_request", "the x-service-grant header is required");
  return token;
};

/**
 * One-time grants for apps without a user system: the consent popup (page, approval and
 * browser helper), and the backend's view of a grant it holds.
 */
export function grantRoutes(deps: Deps, grants: GrantService, auth: Guards) {
  const { rateLimits } = deps.config;
  return new Elysia({ prefix: "/grants" })
    .use(auth)
    .get(
      "/consent",
      async ({ query, set }) => {
        const nonce = randomString(24);
        Object.assign(set.headers, consentHeaders(nonce));
        try {
          return renderConsentPage(await grants.offer(query), nonce);
        } catch (err) {
          if (!(err instanceof ConsentError)) throw err;
          set.status = 400;
          return renderConsentError(err.message, nonce);
        }
      },
      {
        query: t.Object(
          {
            appId: t.Optional(t.String({ maxLength: 64 })),
            usd: t.Optional(t.String({ maxLength: 32 })),
            origin: t.Optional(t.String({ maxLength: 512 })),
            maxUses: t.Optional(t.String({ maxLength: 16 })),
            ttl: t.Optional(t.String({ maxLength: 16 })),
            state: t.Optional(t.String({ maxLength: 512 })),
          },
          { additionalProperties: true },
        ),
        detail: {
          tags: ["grants"],
          summary: "The consent popup (HTML)",
          security: [],
          description:
            "Opened by popup.js with `appId`, `usd`, `origin` (the opener's, registered for the app), and optional `maxUses`, " +
            "`ttl` (seconds, default 86400, at most 30 days) and `state` (echoed back). Bad parameters render an error page.",
          responses: { 200: { description: "The consent page.", content: { "text/html": { schema: { type: "string" } } } }, 400: { description: "An error page.", content: { "text/html": { schema: { type: "string" } } } } },
        },
      },
    )
    .post(
      "/consent",
      async ({ body, request, set, server }) => {
        // Same-origin only: the consent page posts here; other sites' pages may not.
        const site = request.headers.get("sec-fetch-site");
        if (site !== null && site !== "same-origin") throw new ApiError("invalid_request", "grants are approved from the consent page only");
        const appId = await grants.appOfConsent(body.consentToken);
        if (!appId) throw new ApiError("invalid_request", "this consent page has expired or was already used; open it again");
        const address = server?.requestIP(request)?.address ?? "unknown";
        await enforceRateLimit(deps.rateLimiter, { name: "grants-app", ...rateLimits.grantsPerApp }, appId, set.headers);
        await enforceRateLimit(deps.rateLimiter, { name: "grants-address", ...rateLimits.grantsPerAddress }, address, set.headers);
        set.headers["cache-control"] = "no-store";
        return grants.approve(body.consentToken);
      },
      {
        body: ApproveConsentRequest,
        response: { 200: GrantMessage, ...errorResponses(400, 413, 429) },
        // The credential is the one-time consent token in the body.
        detail: { tags: ["grants"], summary: "Approve a consent request (called by the consent page)", security: [] },
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
          responses: { 200: { description: "JavaScript.", content: { "text/javascript": { schema: { type: "string" } } } } },
        },
      },
    )
    .get("/current", ({ app, request }) => grants.view(app.id, grantHeader(request)), {
      secretKey: true,
      response: { 200: GrantStatus, ...errorResponses(400, 401, 402) },
      detail: {
        tags: ["grants"],
        summary: "The grant sent in x-service-grant: cap, usage, uses, expiry, status",
        security: [{ secretKey: [] }],
        parameters: [{ name: "x-service-grant", in: "header", required: true, schema: { type: "string" } }],
      },
    })
    .delete(
      "/current",
      async ({ app, request, set }) => {
        await grants.revoke(app.id, grantHeader(request));
        set.status = 204;
      },
      {
        secretKey: true,
        detail: {
          tags: ["grants"],
          summary: "Revoke the grant sent in x-service-grant",
          security: [{ secretKey: [] }],
          parameters: [{ name: "x-service-grant", in: "header", required: true, schema: { type: "string" } }],
          // By hand, as DELETE /connections is (see there): 204 has no body.
          responses: {
            204: { description: "Revoked. No body." },
            400: { description: "No x-service-grant header.", content: { "application/json": { schema: ErrorEnvelope as object } } },
            401: { description: "Not a secret key of this app.", content: { "application/json": { schema: ErrorEnvelope as object } } },
          },
        },
      },
    );
}
