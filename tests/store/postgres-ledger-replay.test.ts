/**
 * PostgreSQL writes a ledger batch as all new rows first (no ON CONFLICT), and only a batch
 * that meets a row already there is written again skipping it (src/store/postgres/usage-ledger.ts).
 * The store contract covers a replay after the fact; these cover the replay racing the
 * first write from another instance, where the plain INSERT waits on the other's key and
 * then fails, and an error that is not the ledger's key, which must not be retried away.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { openPostgresStore, type PostgresStore } from "../../src/store/postgres";
import type { UsageRow } from "../../src/budget/usage-row";
import { startPostgres, type TestPostgres } from "../helpers/postgres";
import { usageRow } from "../helpers/usage-rows";

let pg: TestPostgres;
let first: PostgresStore;
let second: PostgresStore;
let sql: SQL;
beforeAll(async () => {
  pg = await startPostgres();
  const url = await pg.createDatabase();
  first = await openPostgresStore(url, { poolSize: 2 });
  second = await openPostgresStore(url, { poolSize: 2 });
  sql = new SQL(url, { max: 1 });
});
afterAll(async () => {
  await first?.close();
  await second?.close();
  await sql?.close({ timeout: 0 });
  await pg?.destroy();
});

let seq = 0;
/** A new row for `user-<user>`, costing 100 + user nano. */
const row = (user: number, overrides: Partial<UsageRow> = {}): UsageRow => ({ ...usageRow(seq++, `user-${user}`, 100 + user), ...overrides });

async function totals(): Promise<Map<string, { spent: number; n: number }>> {
  const rows: Array<{ account: string; spent: string; n: string }> = await sql`SELECT account, spent_nano AS spent, request_count AS n FROM usage_totals`;
  return new Map(rows.map((r) => [r.account, { spent: Number(r.spent), n: Number(r.n) }]));
}

test("two instances writing overlapping batches at once write each row once and count it once", async () => {
  const users = Array.from({ length: 40 }, (_, i) => i);
  const expected = new Map<string, { spent: number; n: number }>();
  for (let round = 0; round < 10; round++) {
    const rows = users.map((u) => row(u));
    for (const r of rows) {
      const t = expected.get(r.account) ?? { spent: 0, n: 0 };
      expected.set(r.account, { spent: t.spent + r.costNano, n: t.n + 1 });
    }
    // Each instance has every third row to itself and shares the rest with the other.
    const mine = (k: number) => rows.filter((_, i) => i % 3 !== k);
    const [a, b] = await Promise.all([first.usageLedger.insertBatch(mine(0)), second.usageLedger.insertBatch(mine(1))]);
    expect(a + b).toBe(rows.length);
  }
  const [{ n }] = await sql`SELECT count(*)::int AS n FROM usage_ledger`;
  expect(n).toBe(users.length * 10);
  expect(await totals()).toEqual(expected);
});

test("a batch that fails on anything but the ledger's key writes nothing and is not retried away", async () => {
  const before = await totals();
  const good = row(1);
  // usage_ledger's CHECK on source: the whole statement fails, with its good row.
  const bad = row(2, { source: "invented" as UsageRow["source"] });
  await expect(first.usageLedger.insertBatch([good, bad])).rejects.toMatchObject({ errno: "23514" });
  expect(await first.usageLedger.find(good.requestId)).toBeNull();
  expect(await totals()).toEqual(before);
  // The same batch without the bad row goes in, and a replay of it changes nothing.
  expect(await first.usageLedger.insertBatch([good])).toBe(1);
  expect(await second.usageLedger.insertBatch([good, row(3)])).toBe(1);
  expect((await totals()).get(good.account)).toEqual({ spent: before.get(good.account)!.spent + good.costNano, n: before.get(good.account)!.n + 1 });
});
