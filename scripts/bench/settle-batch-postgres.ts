/**
 * budget_settle_many, as PostgreSQL migration 17 has it (one statement for the batch),
 * against migration 11's loop (three statements per item), on the same batches in turns.
 *
 *   ./node_modules/.bin/bun scripts/bench/settle-batch-postgres.ts [--accounts 10000]
 *     [--batch 16] [--batches 300] [--rounds 4]
 *
 * A durable PostgreSQL (fsync on) with the store's migrations, and migration 11's function
 * beside the current one (tests/helpers/shipped-function.ts). --accounts accounts have
 * totals; each batch settles --batch calls of random accounts, each holding a reservation
 * and a journal entry, with a row each. A round settles --batches fresh batches with each
 * function, one after the other, the order swapped every round; what each settle needs is
 * written before its timed part. Prints per function and round: wall µs a row (the durable
 * commit included) and the backend's CPU µs a row (/proc). Unpinned; bounded by --rounds.
 */
import { flagReader } from "./lib/flags";
import { startBenchPostgres, treeCpuSeconds } from "./lib/postgres";
import { openPostgresStore } from "../../src/store/postgres";
import { CALL_JOURNAL_SQL } from "../../src/store/postgres/call-journal-sql";
import { shippedFunctionAs } from "../../tests/helpers/shipped-function";

const flag = flagReader();
const ACCOUNTS = Number(flag("accounts", "10000"));
const BATCH = Number(flag("batch", "16"));
const BATCHES = Number(flag("batches", "300"));
const ROUNDS = Number(flag("rounds", "4"));

const postgres = await startBenchPostgres(null);
const store = await openPostgresStore(await postgres.createDatabase("bench_settle"), { poolSize: 1 });
const sql = store.database.sql;

interface Item {
  request: string;
  actual: number;
  account: string;
  row: Record<string, unknown>;
}

let next = 0;
function batch(): Item[] {
  return Array.from({ length: BATCH }, () => {
    const request = `req-${String(next++).padStart(9, "0")}`;
    const account = `u/app/2026-11/user-${Math.floor(Math.random() * ACCOUNTS)}`;
    const row = {
      request_id: request,
      account,
      app_id: "app",
      app_user_id: account.slice(account.lastIndexOf("/") + 1),
      grant_id: null,
      period: "2026-11",
      model: "openai/gpt-4o-mini",
      generation_id: `gen-${request}`,
      prompt_tokens: 10,
      completion_tokens: 20,
      cost_nano: 1_000,
      source: "upstream",
      status: "ok",
      streamed: false,
      started_at: Date.now(),
      finished_at: Date.now(),
      reserved_nano: 5_000,
      overrun_nano: 0,
      frozen_cap_nano: null,
    };
    return { request, actual: 1_000, account, row };
  });
}

/** What a call leaves before its settle: a reservation counted in its account's totals, and a journal entry. */
async function holdAll(items: Item[]): Promise<void> {
  const held = JSON.stringify(items.map((i) => ({ request: i.request, account: i.account })));
  await sql`INSERT INTO budget_reservations (request_id, account, amount_nano, cap_nano, instance_id)
    SELECT x.request, x.account, 5000, 1000000000, 'bench' FROM jsonb_to_recordset(${held}::text::jsonb) AS x(request text, account text)`;
  await sql`UPDATE usage_totals t SET reserved_nano = t.reserved_nano + 5000 * s.n
    FROM (SELECT account, count(*) AS n FROM jsonb_to_recordset(${held}::text::jsonb) AS x(account text) GROUP BY account) s
    WHERE t.account = s.account`;
  await sql`INSERT INTO call_journal (request_id, owner, account, app_id, period, model, streamed, started_at, reserved_nano, cap_nano)
    SELECT x.request, 'bench', x.account, 'app', '2026-11', 'openai/gpt-4o-mini', false, 0, 5000, 1000000000
    FROM jsonb_to_recordset(${held}::text::jsonb) AS x(request text, account text)`;
}

try {
  await sql.unsafe(shippedFunctionAs(CALL_JOURNAL_SQL, "budget_settle_many", "budget_settle_many_migration_11"));
  await sql`INSERT INTO usage_totals (account) SELECT 'u/app/2026-11/user-' || g FROM generate_series(0, ${ACCOUNTS - 1}) AS g`;
  await sql`ANALYZE`;
  const [{ pid }] = await sql`SELECT pg_backend_pid() AS pid`;
  const functions = ["budget_settle_many_migration_11", "budget_settle_many"];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const fn of round % 2 === 1 ? functions : [...functions].reverse()) {
      const batches = Array.from({ length: BATCHES }, batch);
      for (const b of batches) await holdAll(b);
      const cpu = treeCpuSeconds(Number(pid));
      const started = performance.now();
      for (const b of batches) await sql.unsafe(`SELECT ${fn}($1::text::jsonb)`, [JSON.stringify(b)]);
      const wallUs = (performance.now() - started) * 1000;
      const rows = BATCHES * BATCH;
      const result = {
        fn,
        round,
        rows,
        wallUsPerRow: +(wallUs / rows).toFixed(1),
        backendCpuUsPerRow: +(((treeCpuSeconds(Number(pid)) - cpu) * 1e6) / rows).toFixed(1),
      };
      console.log(JSON.stringify(result));
    }
  }
  const [check] = await sql`SELECT (SELECT count(*) FROM usage_ledger)::int AS rows, (SELECT sum(request_count) FROM usage_totals)::int AS counted,
    (SELECT sum(reserved_nano) FROM usage_totals)::bigint AS reserved, (SELECT count(*) FROM budget_reservations)::int AS held,
    (SELECT count(*) FROM call_journal)::int AS journal`;
  console.log(JSON.stringify({ check }));
} finally {
  await store.close();
  await postgres.stop();
}
