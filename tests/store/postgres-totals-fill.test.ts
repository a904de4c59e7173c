/**
 * usage_totals keeps room on its pages (migration 14), and the usage writer's batches keep
 * each account's row on its page: a batch over many accounts updates them in place, so the
 * table does not grow by a row version per update.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { openPostgresStore, type PostgresStore } from "../../src/store/postgres";
import { userAccount } from "../../src/budget/accounts";
import type { UsageRow } from "../../src/budget/usage-row";
import { startPostgres, type TestPostgres } from "../helpers/postgres";

let pg: TestPostgres;
let store: PostgresStore;
let sql: SQL;
beforeAll(async () => {
  pg = await startPostgres();
  const url = await pg.createDatabase();
  store = await openPostgresStore(url, { poolSize: 2 });
  sql = new SQL(url, { max: 1 });
});
afterAll(async () => {
  await store?.close();
  await sql?.close({ timeout: 0 });
  await pg?.destroy();
});

test("usage_totals is filled to a fifth of each page", async () => {
  const [row] = await sql`SELECT reloptions FROM pg_class WHERE relname = 'usage_totals'`;
  expect(row.reloptions).toEqual(["fillfactor=20"]);
});

test("ledger batches over many accounts, in any order, add each row and count it once for its account", async () => {
  let seq = 0;
  const batch = (users: number[]): UsageRow[] =>
    users.map((u) => ({
      requestId: `req-${seq++}`,
      account: userAccount("app1", "2026-11", `user-${u}`),
      appId: "app1",
      appUserId: `user-${u}`,
      grantId: null,
      period: "2026-11",
      model: "m",
      generationId: null,
      promptTokens: 1,
      completionTokens: 1,
      costNano: 10 + u,
      source: "upstream",
      status: "ok",
      streamed: false,
      startedAt: 1_000 + seq,
      finishedAt: 2_000 + seq,
      reservedNano: 100,
      overrunNano: 0,
      frozenCapNano: null,
    }));
  const users = Array.from({ length: 50 }, (_, i) => i);
  // Reversed and interleaved: the store puts each batch in index order itself.
  await Promise.all([store.usageLedger.insertBatch(batch([...users].reverse())), store.usageLedger.insertBatch(batch(users.filter((u) => u % 2 === 0)))]);
  const totals: Array<{ account: string; spent: string; n: string }> =
    await sql`SELECT account, spent_nano AS spent, request_count AS n FROM usage_totals ORDER BY account`;
  expect(totals).toHaveLength(50);
  for (const t of totals) {
    const u = Number(t.account.split("user-")[1]);
    const n = u % 2 === 0 ? 2 : 1;
    expect(Number(t.n)).toBe(n);
    expect(Number(t.spent)).toBe(n * (10 + u));
  }
  const listed = await store.usageLedger.listForUser("app1", "user-4", "2026-11", 10);
  expect(listed.map((r) => r.costNano)).toEqual([14, 14]);
});
