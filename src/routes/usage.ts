import { Elysia, t } from "elysia";
import { Type } from "@sinclair/typebox";
import type { Guards } from "../http/guards";
import type { Clock } from "../clock";
import { ApiError } from "../errors";
import { nanoToUsd, parsePeriod, periodAt } from "../money";
import type { UsageLedgerRepository } from "../store/usage-ledger";
import type { UsageRow } from "../budget/usage-row";
import { AppUserId } from "./schemas";
import { errorResponses } from "../error-schema";
import { checkAppUserId } from "../auth/app-user-id";
import { UsageSourceView } from "../services/operator/views";

const UsageRowModel = t.Object({
  requestId: t.String({ description: "Equals the x-request-id of the chat call." }),
  model: t.String(),
  generationId: t.Nullable(t.String()),
  promptTokens: Type.Integer(),
  completionTokens: Type.Integer(),
  costUsd: t.Number(),
  source: UsageSourceView,
  status: t.String(),
  streamed: t.Boolean(),
  startedAt: t.String({ format: "date-time" }),
  finishedAt: t.String({ format: "date-time" }),
  reservedUsd: t.Nullable(t.Number({ description: "What the call reserved before it went upstream (its worst case, clamped to the budget)." })),
  overrunUsd: t.Number({
    description:
      "How much the cost passed the reservation: 0 unless the upstream's price changed under the proxy. After an overrun the budget admits nothing more until the period resets or the cap is raised.",
  }),
});

const UsagePage = t.Object({
  period: t.String(),
  data: t.Array(UsageRowModel),
  nextCursor: t.Nullable(t.String({ description: "Pass as `cursor` for the next (older) page." })),
});

const toApiRow = (r: UsageRow) => ({
  requestId: r.requestId,
  model: r.model,
  generationId: r.generationId,
  promptTokens: r.promptTokens,
  completionTokens: r.completionTokens,
  costUsd: nanoToUsd(r.costNano),
  source: r.source,
  status: r.status,
  streamed: r.streamed,
  startedAt: new Date(r.startedAt).toISOString(),
  finishedAt: new Date(r.finishedAt).toISOString(),
  reservedUsd: r.reservedNano === null || r.reservedNano === undefined ? null : nanoToUsd(r.reservedNano),
  overrunUsd: nanoToUsd(r.overrunNano ?? 0),
});

/** GET /usage: a user's ledger rows for one period, newest first, so an app can explain a charge. */
export function usageRoutes(ledger: UsageLedgerRepository, clock: Clock, ownWritesVisible: () => Promise<void>, auth: Guards) {
  return new Elysia().use(auth).get(
    "/usage",
    async ({ app, query }) => {
      const period = query.period ? parsePeriod(query.period) : periodAt(clock.now());
      if (!period) throw new ApiError("invalid_request", "query.period must be YYYY-MM");
      const limit = query.limit ?? 50;
      const before = query.cursor ? decodeCursor(query.cursor) : undefined;
      // Read-your-writes: rows this process still holds in its writer's queue are written
      // first, so a call's row shows right after the call. (A failing store keeps them queued.)
      // A JSON call's row is queued once its settle is done, which its answer did not wait for.
      await ownWritesVisible();
      const rows = await ledger.listForUser(app.id, checkAppUserId(query.appUserId, "query.appUserId"), period.id, limit + 1, before);
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        period: period.id,
        data: page.map(toApiRow),
        nextCursor: rows.length > limit && last ? encodeCursor(last) : null,
      };
    },
    {
      secretKey: true,
      query: t.Object({
        appUserId: AppUserId,
        period: t.Optional(t.String({ description: "YYYY-MM (UTC); default the current period." })),
        limit: t.Optional(t.Integer({ minimum: 1, maximum: 500 })),
        cursor: t.Optional(t.String({ maxLength: 512 })),
      }),
      response: { 200: UsagePage, ...errorResponses(400, 401) },
      detail: { tags: ["usage"], summary: "A user's metered requests in one period", security: [{ secretKey: [] }] },
    },
  );
}

function encodeCursor(row: UsageRow): string {
  return Buffer.from(`${row.startedAt}:${row.requestId}`).toString("base64url");
}

function decodeCursor(cursor: string): { startedAt: number; requestId: string } {
  const text = Buffer.from(cursor, "base64url").toString();
  const sep = text.indexOf(":");
  const startedAt = Number(text.slice(0, sep));
  if (sep < 1 || !Number.isSafeInteger(startedAt)) throw new ApiError("invalid_request", "query.cursor is not a cursor from this endpoint");
  return { startedAt, requestId: text.slice(sep + 1) };
}
