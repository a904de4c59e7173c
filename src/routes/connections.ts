import { Elysia, t } from "elysia";
import type { Guards } from "../http/guards";
import type { ConnectionService } from "../services/connections";
import { ApiError } from "../errors";
import { ConnectionStatusModel, MonthlyUsd } from "./schemas";
import { ErrorEnvelope, errorResponses } from "../error-schema";

export const ApproveRequest = t.Object({ monthlyUsd: t.Optional(MonthlyUsd) });

const sessionSecurity = [{ sessionToken: [] }];

/**
 * The body is optional, and Elysia validates an optional body only when it is a non-empty
 * object; its parser also swallows malformed JSON. Either way a body the user did send
 * (`5`, `"5"`, `{"monthlyUsd": 5` cut short) would read as "no cap given" and approve the
 * token's limit instead. An absent or empty (`content-length: 0`) body is fine. Runs after
 * the session macro has authenticated the request.
 */
function rejectNonObjectBody({ body, request }: { body: unknown; request: Request }): void {
  if (body === undefined && (!request.bodyUsed || request.headers.get("content-length") === "0")) return;
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new ApiError("invalid_request", "body: must be a JSON object");
  }
}

/**
 * /connections: the app's browser code, holding a session token, approves, updates,
 * reads and revokes its user's connection. App and user come only from the token.
 */
export function connectionRoutes(connections: ConnectionService, auth: Guards) {
  return new Elysia()
    .use(auth)
    .post("/connections", async ({ session, body }) => connections.approve(session, body?.monthlyUsd), {
      session: true,
      // Each write emits a webhook: limited per user (RL_USER_WRITES).
      rateLimit: "userWrites",
      body: t.Optional(ApproveRequest),
      transform: rejectNonObjectBody,
      response: { 200: ConnectionStatusModel, ...errorResponses(400, 401, 413, 429) },
      detail: {
        tags: ["connections"],
        summary: "Approve or update the user's monthly cap",
        description:
          "The cap is `monthlyUsd` when given, else the token's requested limit, else (on update) the current cap. " +
          "It may not exceed the token's requested limit nor the service maximum. Approving again clears `fundingStatus: invalid`. " +
          "A connection the user pays for (`fundingSource: user`) keeps or lowers its cap here; raising it is 400, since the user's key was made with the cap as its monthly limit: " +
          "link the account again with the new cap (POST /connections/funding, as the connect page does).",
        security: sessionSecurity,
      },
    })
    .get("/connections", async ({ session }) => connections.connectionStatus(session.appId, session.appUserId), {
      session: true,
      response: { 200: ConnectionStatusModel, ...errorResponses(401) },
      detail: { tags: ["connections"], summary: "Read the user's connection", security: sessionSecurity },
    })
    .delete(
      "/connections",
      async ({ session, set }) => {
        await connections.revoke(session.appId, session.appUserId);
        set.status = 204;
      },
      {
        session: true,
        rateLimit: "userWrites",
        // Documented by hand: @elysiajs/openapi publishes a `t.Void()` response as
        // `content: {type: "void"}`, which is not an OpenAPI media-type map. 204 has no body.
        detail: {
          tags: ["connections"],
          summary: "Revoke the user's connection (idempotent)",
          security: sessionSecurity,
          responses: {
            204: { description: "Revoked, or there was nothing to revoke. No body." },
            401: { description: "Response for status 401", content: { "application/json": { schema: ErrorEnvelope as object } } },
            429: { description: "Response for status 429", content: { "application/json": { schema: ErrorEnvelope as object } } },
          },
        },
      },
    );
}
