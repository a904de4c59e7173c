/**
 * Keyset paging for the lists that grow with an app's users (connections, grants): a page
 * is read with one row more than asked, so the last page says so without an extra query,
 * and the cursor is the last row's key, opaque to the caller (base64url of a JSON array).
 */
import { invalid, type InputNames } from "./input";
import type { Page } from "./views";

export interface PageRequest {
  /** Rows per page; DEFAULT_PAGE_SIZE when left out. */
  limit?: number;
  /** A `nextCursor` from the previous page. */
  cursor?: string;
}

export const DEFAULT_PAGE_SIZE = 100;
export const MAX_PAGE_SIZE = 1000;

export function pageSize(names: InputNames, request: PageRequest): number {
  const limit = request.limit ?? DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE) throw invalid(`${names.limit} must be an integer from 1 to ${MAX_PAGE_SIZE}`);
  return limit;
}

/** The key a cursor holds, checked by `isKey`; a cursor from elsewhere is 400. */
export function decodeCursor<K extends unknown[]>(names: InputNames, cursor: string, isKey: (value: unknown) => value is K): K {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(cursor, "base64url").toString());
  } catch {
    value = undefined;
  }
  if (!isKey(value)) throw invalid(`${names.cursor} is not a cursor from this list`);
  return value;
}

/** The page of `rows` (read with `limit + 1`), its items shown by `view`. */
export function pageOf<Row, View>(rows: Row[], limit: number, keyOf: (row: Row) => unknown[], view: (row: Row) => View): Page<View> {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  const nextCursor = rows.length > limit && last !== undefined ? Buffer.from(JSON.stringify(keyOf(last))).toString("base64url") : null;
  return { data: page.map(view), nextCursor };
}
