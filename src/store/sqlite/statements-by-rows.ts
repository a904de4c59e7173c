import type { Database } from "bun:sqlite";

/**
 * Many rows per statement. bun:sqlite's cost per statement run (bind, step, reset) was most
 * of a small row's cost (ARCHITECTURE.md §7 "Rows per INSERT"), so a batch goes in
 * statements of up to ROWS_PER_STATEMENT rows each, every size prepared once and kept.
 * 18 columns × 50 rows stays far below SQLite's 32,766 parameters per statement.
 */
export const ROWS_PER_STATEMENT = 50;

export class StatementsByRows {
  private readonly prepared = new Map<number, ReturnType<Database["query"]>>();

  constructor(
    private readonly db: Database,
    /** The statement's text for `rows` rows (1 to ROWS_PER_STATEMENT). */
    private readonly sql: (rows: number) => string,
  ) {}

  for(rows: number): ReturnType<Database["query"]> {
    let statement = this.prepared.get(rows);
    if (!statement) this.prepared.set(rows, (statement = this.db.query(this.sql(rows))));
    return statement;
  }
}

/** `count` copies of `group` joined by commas: the VALUES list, or an IN list, of a statement for `count` rows. */
export const repeated = (group: string, count: number): string => Array.from({ length: count }, () => group).join(", ");
