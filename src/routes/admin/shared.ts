import { t } from "elysia";
import { MAX_PAGE_SIZE } from "../../services/operator";
import { errorResponses } from "../../error-schema";

/** Every admin route: the operator's token, the `admin` tag (ARCHITECTURE.md §4: the docs describe every endpoint). */
export function adminDetail(summary: string, description?: string) {
  return { tags: ["admin"], summary, ...(description ? { description } : {}), security: [{ adminToken: [] }] };
}

/**
 * What any admin route may answer besides its success: 401 (token), 404 (the API is off,
 * or no such app), 429 (a wrong token from an address past its failed authentications), plus `more`.
 */
export const adminErrors = (...more: number[]) => errorResponses(...more, 401, 404, 429);

export const AppParams = t.Object({ appId: t.String({ maxLength: 64 }) });

export const PageQuery = t.Object({
  limit: t.Optional(t.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE, description: "Items per page (default 100)." })),
  cursor: t.Optional(t.String({ maxLength: 1024, description: "The `nextCursor` of the previous page." })),
});
