import { CALL_JOURNAL_SQL } from "../../src/store/postgres/call-journal-sql";

/**
 * PostgreSQL migration 11's budget_settle_many (a loop of three statements per item), taken
 * from the shipped migration's own text and created under `name`: the behaviour migration
 * 17's one-statement settle keeps (tests/store/postgres-settle-batch.test.ts), and the
 * baseline its benchmark measures against (scripts/bench/settle-batch-postgres.ts).
 */
export function migration11Settle(name: string): string {
  const start = CALL_JOURNAL_SQL.indexOf("CREATE OR REPLACE FUNCTION budget_settle_many(");
  const end = CALL_JOURNAL_SQL.indexOf("END $$;", start) + "END $$;".length;
  if (start < 0 || end < start) throw new Error("migration 11's budget_settle_many not found");
  // Migration 15 set this on the function; the copy gets it too, so only the body differs.
  return `${CALL_JOURNAL_SQL.slice(start, end).replace("budget_settle_many(", `${name}(`)}
    ALTER FUNCTION ${name}(jsonb) SET enable_seqscan = off;`;
}
