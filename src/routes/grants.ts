import { Elysia, t } from "elysia";
import { Type } from "@sinclair/typebox";
import type { Guards } from "../http/guards";
import { ApiError } from "../errors";
import type { GrantService } from "../services/grants";
import { ErrorEnvelope, errorResponses } from "../error-schema";

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

/** The backend's view of a one-time grant it holds (the consent popup that creates one: grant-consent.ts). */
export function grantRoutes(grants: GrantService, auth: Guards) {
  return new Elysia({ prefix: "/grants" })
    .use(auth)
    .get("/current", async ({ app, request }) => grants.view(app.id, grantHeader(request)), {
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
