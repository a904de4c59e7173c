import { Elysia, t } from "elysia";
import type { Guards } from "../http/guards";
import type { ConnectionService } from "../services/connections";
import { ApiError } from "../errors";
import { ConnectionStatusModel, MonthlyUsd, errorResponses } from "./models";

const ApproveRequest = t.Object({ monthlyUsd: t.Optional(MonthlyUsd) });

const sessionSecurity = [{ sessionToken: [] }];

/**
 * /connections: the app's browser code, holding a session token, approves, updates,
 * reads and revokes its user's connection. App and user come only from the token.
 */
export function connectionRoutes(connections: ConnectionService, auth: Guards) {
  return new Elysia()
    .use(auth)
    .post("/connections", ({ session, body }) => connections.approve(session, body?.monthlyUsd), {
      session: true,
      body: t.Optional(ApproveRequest),
      // Elysia's parser for an optional body swallows malformed JSON, which would then read
      // as "no body" and approve the token's limit instead of the cap the user chose.
      // Runs after the session macro has authenticated the request.
      transform({ body, request }) {
        if (body === undefined && request.bodyUsed) throw new ApiError("invalid_request", "request body is not valid JSON");
      },
      response: { 200: ConnectionStatusModel, ...errorResponses(400, 401, 413) },
      detail: {
        tags: ["connections"],
        summary: "Approve or update the user's monthly cap",
        description:
          "The cap is `monthlyUsd` when given, else the token's requested limit, else (on update) the current cap. " +
          "It may not exceed the token's requested limit nor the service maximum. Approving again clears `fundingStatus: invalid`.",
        security: sessionSecurity,
        // The body itself is optional (the token may carry the limit); say so in the docs.
        requestBody: { required: false, content: { "application/json": { schema: ApproveRequest as object } } },
      },
    })
    .get("/connections", ({ session }) => connections.connectionStatus(session.appId, session.appUserId), {
      session: true,
      response: { 200: ConnectionStatusModel, ...errorResponses(401) },
      detail: { tags: ["connections"], summary: "Read the user's connection", security: sessionSecurity },
    })
    .delete(
      "/connections",
      ({ session, set }) => {
        connections.revoke(session.appId, session.appUserId);
        set.status = 204;
      },
      {
        session: true,
        response: { 204: t.Void(), ...errorResponses(401) },
        detail: { tags: ["connections"], summary: "Revoke the user's connection (idempotent)", security: sessionSecurity },
      },
    );
}
