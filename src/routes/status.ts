import { Elysia, t } from "elysia";
import type { Guards } from "../http/guards";
import type { ConnectionService } from "../services/connections";
import { AppUserId, StatusModel } from "./schemas";
import { errorResponses } from "../error-schema";
import { checkAppUserId } from "../auth/app-user-id";

/** GET /status: the app backend reads one user's connection and budget. */
export function statusRoutes(connections: ConnectionService, auth: Guards) {
  return new Elysia().use(auth).get("/status", async ({ app, query }) => connections.status(app.id, checkAppUserId(query.appUserId, "query.appUserId")), {
    secretKey: true,
    query: t.Object({ appUserId: AppUserId }),
    response: { 200: StatusModel, ...errorResponses(400, 401) },
    detail: {
      tags: ["status"],
      summary: "A user's connection, monthly limit, usage and remaining budget",
      security: [{ secretKey: [] }],
    },
  });
}
