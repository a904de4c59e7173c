/**
 * A PL/pgSQL function of one jsonb argument as a shipped migration created it, taken from
 * that migration's own text and created under another name: the behaviour a later
 * migration's rewrite keeps (tests/store/postgres-settle-batch.test.ts), and the baseline
 * its benchmark measures against (scripts/bench/settle-batch-postgres.ts).
 * Migration 15 set `enable_seqscan = off` on the per-call functions; the copy gets it too,
 * so only the body differs.
 */
export function shippedFunctionAs(migrationSql: string, name: string, as: string): string {
  const start = migrationSql.search(new RegExp(`CREATE (OR REPLACE )?FUNCTION ${name}\\(`));
  const end = migrationSql.indexOf("END $$;", start) + "END $$;".length;
  if (start < 0 || end < start) throw new Error(`${name} not found in that migration`);
  const body = migrationSql.slice(start, end).replace(`FUNCTION ${name}(`, `FUNCTION ${as}(`);
  return `${body}\n    ALTER FUNCTION ${as}(jsonb) SET enable_seqscan = off;`;
}
