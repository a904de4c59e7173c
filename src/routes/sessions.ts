import { Elysia, t } from "elysia";
import { Type } from "@sinclair/typebox";
import type { SessionTokens } from "../auth/session-token";
import type { Guards } from "../http/guards";
import { ApiError } from "../errors";
import { usdAmountToNano } from "../money";
import { AppUserId, MonthlyUsd } from "./schemas";
import { errorResponses } from "../error-schema";
import { checkAppUserId } from "../auth/app-user-id";

export const SessionRequest = t.Object({
  appUserId: AppUserId,
  requestLimit: t.Optional(t.Object({ monthlyUsd: MonthlyUsd })),
});

const SessionResponse = t.Object({
  token: t.String({ description: "Session JWT for the app's browser code; send as `Authorization: Bearer`." }),
  // TypeBox's integer: Elysia's `t.Integer` also accepts numeric strings (query coercion),
  // and openapi.json would then promise clients a string or an integer.
  expiresAt: Type.Integer({ description: "Unix seconds." }),
});

/** POST /sessions: the app backend mints a short-lived session token for one of its users. */
export function sessionRoutes(sessionTokens: SessionTokens, maxMonthlyUsd: number, auth: Guards) {
  return new Elysia().use(auth).post(
    "/sessions",
    async ({ app, secretKeyId, body }) => {
      const limit = body.requestLimit?.monthlyUsd ?? null;
      if (limit !== null) {
        // The cap a user approves may not exceed it, so it must be a cap they could approve.
        const refuse = (problem: string) => new ApiError("invalid_request", `requestLimit.monthlyUsd ${problem}`);
        if (limit > maxMonthlyUsd) throw refuse(`must be a finite number up to ${maxMonthlyUsd}`);
        usdAmountToNano(limit, { rounding: "floor" }, refuse);
      }
      return sessionTokens.mint(app.id, secretKeyId, checkAppUserId(body.appUserId, "body.appUserId"), limit);
    },
    {
      secretKey: true,
      rateLimit: "sessions",
      body: SessionRequest,
      response: { 200: SessionResponse, ...errorResponses(400, 401, 413, 429) },
      detail: {
        tags: ["sessions"],
        summary: "Mint a session token for one of the app's users",
        security: [{ secretKey: [] }],
      },
    },
  );
}
