/**
 * PostgreSQL migration 17 settles a batch in one statement (src/store/postgres/settle-set-sql.ts).
 * Its answer must be migration 11's, item by item: two databases take the same seeded walk
 * of holds and settle batches, one settling with the current budget_settle_many, the other
 * with migration 11's loop (taken from the shipped migration's own text), and after every
 * batch the two must hold the same ledger, totals, reservations and journal. The walk draws
 * request ids from a window of six that moves on by one each step, so batches repeat a
 * request, settle one twice, replay a written row, and settle without a reservation or
 * without a row; the test counts that each case came up.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { openPostgresStore, type PostgresStore } from "../../src/store/postgres";
import { startPostgres, type TestPostgres } from "../helpers/postgres";
import { CALL_JOURNAL_SQL } from "../../src/store/postgres/call-journal-sql";
import { shippedFunctionAs } from "../helpers/shipped-function";
import { fixedRandom } from "../helpers/fixed-random";

let pg: TestPostgres;
let current: PostgresStore;
let reference: PostgresStore;

beforeAll(async () => {
  pg = await startPostgres();
  current = await openPostgresStore(await pg.createDatabase(), { poolSize: 1 });
  reference = await openPostgresStore(await pg.createDatabase(), { poolSize: 1 });
  await reference.database.sql.unsafe(shippedFunctionAs(CALL_JOURNAL_SQL, "budget_settle_many", "budget_settle_many_migration_11"));
});
afterAll(async () => {
  await current?.close();
  await reference?.close();
  await pg?.destroy();
});

const ACCOUNTS = ["u/app/2026-11/a", "u/app/2026-11/b", "u/app/2026-11/c", "g/app/2026-11-26"];
const COSTS = [0, 400, 5_000, 20_000];

interface Step {
  holds: Array<{ request: string; account: string; amount: number; cap: number; journal: boolean }>;
  settles: Array<{ request: string; actual: number; row: Record<string, unknown> | null }>;
}

function walk(steps: number, seed: number): Step[] {
  const draw = fixedRandom(seed);
  const out: Step[] = [];
  for (let s = 0; s < steps; s++) {
    // A window of six ids that moves on by one each step: new requests keep coming, and each
    // is held, settled and replayed over the steps it stays in the window.
    const request = () => `req-${String(s + draw(6)).padStart(4, "0")}`;
    const holds = Array.from({ length: draw(4) }, () => ({
      request: request(),
      account: ACCOUNTS[draw(ACCOUNTS.length)]!,
      amount: [1_000, 5_000, 10_000][draw(3)]!,
      cap: [50_000, 80_000][draw(2)]!,
      journal: draw(2) === 0,
    }));
    const settles = Array.from({ length: 1 + draw(7) }, () => {
      const id = request();
      const actual = COSTS[draw(COSTS.length)]!;
      const row =
        draw(4) === 0
          ? null
          : {
              request_id: id,
              account: ACCOUNTS[draw(ACCOUNTS.length)],
              app_id: "app",
              app_user_id: "a",
              grant_id: null,
              period: "2026-11",
              model: "openai/gpt-4o-mini",
              generation_id: `gen-${id}`,
              prompt_tokens: 10,
              completion_tokens: 20,
              cost_nano: actual,
              source: "upstream",
              status: "ok",
              streamed: draw(2) === 0,
              started_at: 1_000 + s,
              finished_at: 2_000 + s,
              reserved_nano: 5_000,
              overrun_nano: 0,
              frozen_cap_nano: draw(3) === 0 ? [50_000, 80_000][draw(2)] : null,
            };
      return { request: id, actual, row };
    });
    out.push({ holds, settles });
  }
  return out;
}

/** A reservation as budget_reserve_many leaves one: held, and counted in the account's reserved total. */
async function hold(store: PostgresStore, h: Step["holds"][number]): Promise<void> {
  await store.database.run(
    (sql) => sql`WITH held AS (
        INSERT INTO budget_reservations (request_id, account, amount_nano, cap_nano, instance_id)
        VALUES (${h.request}, ${h.account}, ${h.amount}, ${h.cap}, 'walk') ON CONFLICT (request_id) DO NOTHING RETURNING account, amount_nano)
      INSERT INTO usage_totals (account, reserved_nano) SELECT account, amount_nano FROM held
      ON CONFLICT (account) DO UPDATE SET reserved_nano = usage_totals.reserved_nano + EXCLUDED.reserved_nano`,
  );
  if (h.journal) {
    await store.database.run(
      (sql) => sql`INSERT INTO call_journal (request_id, owner, account, app_id, period, model, streamed, started_at, reserved_nano, cap_nano)
        VALUES (${h.request}, 'walk', ${h.account}, 'app', '2026-11', 'openai/gpt-4o-mini', false, 1000, ${h.amount}, ${h.cap})
        ON CONFLICT (request_id) DO NOTHING`,
    );
  }
}

async function state(store: PostgresStore) {
  return store.database.run(async (sql) => ({
    ledger: await sql`SELECT * FROM usage_ledger ORDER BY request_id`,
    totals: await sql`SELECT * FROM usage_totals ORDER BY account`,
    reservations: await sql`SELECT * FROM budget_reservations ORDER BY request_id`,
    journal: await sql`SELECT request_id FROM call_journal ORDER BY request_id`,
  }));
}

test("a batch settled in one statement leaves what migration 11's loop left, batch by batch", async () => {
  const seen = { repeatedInBatch: 0, replayed: 0, releasedWithoutRow: 0, settledWithoutReservation: 0 };
  for (const [at, step] of walk(120, 20261126).entries()) {
    for (const h of step.holds) {
      await hold(current, h);
      await hold(reference, h);
    }
    const before = await state(current);
    const written = new Set(before.ledger.map((r: { request_id: string }) => r.request_id));
    const held = new Set(before.reservations.map((r: { request_id: string }) => r.request_id));
    const ids = step.settles.map((i) => i.request);
    if (new Set(ids).size < ids.length) seen.repeatedInBatch++;
    for (const item of step.settles) {
      if (item.row && written.has(item.request)) seen.replayed++;
      if (!item.row && held.has(item.request)) seen.releasedWithoutRow++;
      if (item.row && !held.has(item.request)) seen.settledWithoutReservation++;
    }

    const items = JSON.stringify(step.settles);
    const [mine] = await current.database.run((sql) => sql`SELECT budget_settle_many(${items}::text::jsonb) AS n`);
    const [theirs] = await reference.database.run((sql) => sql`SELECT budget_settle_many_migration_11(${items}::text::jsonb) AS n`);
    expect({ at, n: mine.n }).toEqual({ at, n: theirs.n });
    expect({ at, ...(await state(current)) }).toEqual({ at, ...(await state(reference)) });
  }
  // The walk reached the cases it is for.
  const end = await state(current);
  expect(end.ledger.length).toBeGreaterThan(60);
  expect(end.totals.some((t: { frozen_cap_nano: unknown }) => t.frozen_cap_nano !== null)).toBe(true);
  for (const count of Object.values(seen)) expect(count).toBeGreaterThan(5);
});
