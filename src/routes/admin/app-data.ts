import { Elysia, t } from "elysia";
import type { Logger } from "../../logger";
import type { Guards } from "../../http/guards";
import type { OperatorService } from "../../services/operator";
import {
  ConnectionDetailsView,
  ConnectionView,
  GrantView,
  PageView,
  RevokedConnectionView,
  RevokedGrantView,
  UsageExportRowView,
} from "../../services/operator/views";
import { AppUserId } from "../schemas";
import { ErrorEnvelope } from "../../error-schema";
import { adminDetail, adminErrors, AppParams, PageQuery } from "./shared";

const UserParams = t.Object({ ...AppParams.properties, appUserId: AppUserId });
const GrantParams = t.Object({ ...AppParams.properties, grantId: t.String({ maxLength: 64 }) });

const Day = t.String({ description: "A UTC day, YYYY-MM-DD; both ends are included." });
const ExportQuery = t.Object({ from: Day, to: Day, format: t.Optional(t.Union([t.Literal("csv"), t.Literal("jsonl")], { description: "Default jsonl." })) });

/** /admin/apps/{appId}/…: the operator's commands on users, grants and usage (src/cli/data-commands.ts) over HTTP. */
export function adminAppDataRoutes(operator: OperatorService, auth: Guards, ownWritesVisible: () => Promise<void>, logger: Logger) {
  return new Elysia({ prefix: "/apps/:appId" })
    .use(auth)
    .get("/connections", async ({ params, query }) => operator.connections.list(params.appId, query), {
      adminToken: true,
      params: AppParams,
      query: PageQuery,
      response: { 200: PageView(ConnectionView), ...adminErrors(400) },
      detail: adminDetail("An app's user connections (active and revoked), by user id"),
    })
    .get("/connections/:appUserId", async ({ params }) => operator.connections.show(params.appId, params.appUserId), {
      adminToken: true,
      params: UserParams,
      response: { 200: ConnectionDetailsView, ...adminErrors(400) },
      detail: adminDetail("One user's connection, with this month's recorded usage"),
    })
    .delete("/connections/:appUserId", async ({ params }) => operator.connections.revoke(params.appId, params.appUserId), {
      adminToken: true,
      params: UserParams,
      response: { 200: RevokedConnectionView, ...adminErrors(400) },
      detail: adminDetail("Revoke a user's connection: their calls get 402 not_connected at once", "404 when the user has no active connection."),
    })
    .get("/grants", async ({ params, query }) => operator.grants.list(params.appId, query), {
      adminToken: true,
      params: AppParams,
      query: PageQuery,
      response: { 200: PageView(GrantView), ...adminErrors(400) },
      detail: adminDetail("An app's one-time grants, oldest first (never their tokens)"),
    })
    .delete("/grants/:grantId", async ({ params }) => operator.grants.revoke(params.appId, params.grantId), {
      adminToken: true,
      params: GrantParams,
      response: { 200: RevokedGrantView, ...adminErrors() },
      detail: adminDetail("Revoke a grant: calls with its token are refused at once"),
    })
    .get(
      "/usage",
      async ({ params, query }) => {
        // Read-your-writes, as GET /usage does: calls this process answered are in the export.
        await ownWritesVisible();
        const exported = await operator.usage.export(params.appId, query);
        // The first page is read before answering: a failing store gets the error envelope,
        // not a 200 cut short.
        const pages = exported.pages[Symbol.asyncIterator]();
        const first = await pages.next();
        return new Response(lineStream(pages, first, logger), {
          headers: {
            "content-type": exported.contentType,
            "content-disposition": `attachment; filename="usage-${params.appId}-${query.from}-${query.to}.${exported.format}"`,
          },
        });
      },
      {
        adminToken: true,
        params: AppParams,
        query: ExportQuery,
        // Documented by hand: a route's generated responses replace `detail.responses`, and
        // this one's success is not JSON. (Error bodies are never checked against `response`.)
        detail: {
          ...adminDetail(
            "Export an app's metered requests between two days, oldest first",
            "The same rows as `cli usage export`: JSON lines (one UsageExportRow per line) or CSV with a header line. Streamed, a store page at a time.",
          ),
          responses: {
            200: {
              description: "The rows, streamed.",
              content: { "application/x-ndjson": { schema: UsageExportRowView as object }, "text/csv": { schema: { type: "string" } } },
            },
            ...documentedErrors(400, 401, 404, 429),
          },
        },
      },
    );
}

const documentedErrors = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((s) => [s, { description: `Response for status ${s}`, content: { "application/json": { schema: ErrorEnvelope as object } } }]),
  );

/**
 * Lines as a byte stream, a page per pull, starting with the page already read: the store
 * is read only as fast as the client reads. A failure after the first byte can only cut
 * the response short, so it is logged.
 */
function lineStream(iterator: AsyncIterator<string[]>, first: IteratorResult<string[]>, logger: Logger): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let pending: IteratorResult<string[]> | null = first;
  return new ReadableStream({
    async pull(controller) {
      try {
        // An empty page enqueues nothing, and a pull that enqueues nothing is not called again: read on.
        for (;;) {
          const next = pending ?? (await iterator.next());
          pending = null;
          if (next.done) return controller.close();
          if (next.value.length === 0) continue;
          return controller.enqueue(encoder.encode(next.value.map((line) => `${line}\n`).join("")));
        }
      } catch (err) {
        logger.error("usage export failed mid-stream", { error: err instanceof Error ? err.message : String(err) });
        controller.error(err);
      }
    },
    async cancel() {
      await iterator.return?.();
    },
  });
}
