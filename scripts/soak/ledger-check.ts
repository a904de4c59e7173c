/**
 * After the proxy has exited: does the usage ledger say exactly what happened? Every
 * request the client saw complete (200) has one row, under the generation id the client
 * saw; every generation the mock served has exactly one row; refused requests (402/429)
 * have none. And the three places that count money agree: the rows, the per-account
 * totals table and Redis's live counters (with nothing left reserved), all within each cap.
 */
import { Database } from "bun:sqlite";
import type Redis from "ioredis";
import type { Tally } from "./driver";
import type { ServedTracker } from "./served";

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

export interface LedgerFacts {
  rows: number;
  rowsByStatus: Record<string, number>;
  rowsBySource: Record<string, number>;
  servedByMock: number;
  completedAtClient: number;
  refusedAtClient: number;
  pageSize: number;
  walAutocheckpointPages: number;
}

interface Row {
  request_id: string;
  generation_id: string | null;
  account: string;
  app_user_id: string | null;
  status: string;
  source: string;
  cost_nano: number;
}

/** Redis's budget keys (`bl:<account>` hashes, `br:<request>` reservations), read before Redis stops. */
export interface RedisBudgets {
  accounts: Map<string, { spent: number; reserved: number }>;
  openReservations: number;
}

export async function readRedisBudgets(redis: Redis): Promise<RedisBudgets> {
  const accounts = new Map<string, { spent: number; reserved: number }>();
  for (const key of await redis.keys("bl:*")) {
    const h = await redis.hgetall(key);
    accounts.set(key.slice(3), { spent: Number(h.spent ?? NaN), reserved: Number(h.reserved ?? NaN) });
  }
  return { accounts, openReservations: (await redis.keys("br:*")).length };
}

const countBy = <T>(items: T[], key: (t: T) => string) => {
  const out: Record<string, number> = {};
  for (const item of items) out[key(item)] = (out[key(item)] ?? 0) + 1;
  return out;
};

export function checkLedger(databasePath: string, tally: Tally, served: ServedTracker, redis: RedisBudgets): { checks: Check[]; facts: LedgerFacts } {
  const db = new Database(databasePath, { readonly: true });
  try {
    const rows = db.query<Row, []>("SELECT request_id, generation_id, account, app_user_id, status, source, cost_nano FROM usage_ledger").all();
    const totals = db
      .query<{ account: string; spent_nano: number; request_count: number }, []>("SELECT account, spent_nano, request_count FROM usage_totals")
      .all();
    const caps = new Map(
      db
        .query<{ app_user_id: string; monthly_cap_nano: number }, []>("SELECT app_user_id, monthly_cap_nano FROM connections")
        .all()
        .map((c) => [c.app_user_id, c.monthly_cap_nano]),
    );
    const pageSize = db.query<{ page_size: number }, []>("PRAGMA page_size").get()!.page_size;
    // Per connection, and the service never sets it: this reads SQLite's compiled-in default, the service's value.
    const walAutocheckpointPages = db.query<{ wal_autocheckpoint: number }, []>("PRAGMA wal_autocheckpoint").get()!.wal_autocheckpoint;

    const checks: Check[] = [];
    const byRequest = new Map(rows.map((r) => [r.request_id, r]));
    const byGeneration = new Map<string, number>();
    for (const r of rows) if (r.generation_id) byGeneration.set(r.generation_id, (byGeneration.get(r.generation_id) ?? 0) + 1);

    // 1. Every 200 the client got has its row, under the generation id the client saw.
    let missing = 0;
    let wrongGeneration = 0;
    for (const [requestId, generationId] of tally.completed) {
      const row = byRequest.get(requestId);
      if (!row) missing++;
      else if (generationId === null || row.generation_id !== generationId) wrongGeneration++;
    }
    checks.push({
      name: "a row for every 200",
      ok: missing === 0 && wrongGeneration === 0,
      detail: `${tally.completed.size} completions: ${missing} without a row, ${wrongGeneration} with another generation id`,
    });

    // 2. No row for a refused request.
    const refusedWithRow = tally.refused.filter((id) => byRequest.has(id)).length;
    checks.push({ name: "no row for a 402/429", ok: refusedWithRow === 0, detail: `${tally.refused.length} refused, ${refusedWithRow} with a row` });

    // 3. Every generation the mock served has exactly one row, and every row one served generation.
    let servedWithoutRow = 0;
    let servedTwice = 0;
    let servedNotOk = 0;
    for (const [id, s] of served.byId) {
      const n = byGeneration.get(id) ?? 0;
      if (n === 0) servedWithoutRow++;
      if (n > 1) servedTwice++;
      if (s.status !== 200 || !s.completed) servedNotOk++;
    }
    const rowsNotServed = rows.filter((r) => !r.generation_id || !served.byId.has(r.generation_id)).length;
    checks.push({
      name: "rows = generations served",
      ok: servedWithoutRow === 0 && servedTwice === 0 && rowsNotServed === 0 && rows.length === served.byId.size && rows.length === tally.completed.size,
      detail: `${rows.length} rows, ${served.byId.size} served by the mock, ${tally.completed.size} 200s at the client; ${servedWithoutRow} served without a row, ${servedTwice} with two or more, ${rowsNotServed} rows matching no served generation`,
    });
    checks.push({
      name: "upstream answered every request in full",
      ok: servedNotOk === 0,
      detail: `${servedNotOk} served requests not 200 or not completed (the proxy keeps reading after a client leaves)`,
    });

    // 4. Row statuses: completions and client disconnects only, with the upstream's cost.
    const rowsByStatus = countBy(rows, (r) => r.status);
    const rowsBySource = countBy(rows, (r) => r.source);
    const disconnectedRows = rowsByStatus.client_disconnected ?? 0;
    const odd = rows.length - (rowsByStatus.ok ?? 0) - disconnectedRows;
    checks.push({
      name: "row statuses",
      ok: odd === 0 && disconnectedRows === tally.clientDisconnects,
      detail: `${JSON.stringify(rowsByStatus)}; ${tally.clientDisconnects} clients left mid-stream`,
    });
    checks.push({ name: "costs from the upstream", ok: (rowsBySource.upstream ?? 0) === rows.length, detail: JSON.stringify(rowsBySource) });

    // 5. Money agrees in the rows, usage_totals and Redis; nothing left reserved; caps held.
    const spentByAccount = new Map<string, { nano: number; n: number; user: string | null }>();
    for (const r of rows) {
      const a = spentByAccount.get(r.account) ?? { nano: 0, n: 0, user: r.app_user_id };
      a.nano += r.cost_nano;
      a.n++;
      spentByAccount.set(r.account, a);
    }
    const totalsByAccount = new Map(totals.map((t) => [t.account, t]));
    let totalsMismatch = 0;
    let redisMismatch = 0;
    let overCap = 0;
    let stillReserved = 0;
    for (const [account, a] of spentByAccount) {
      const t = totalsByAccount.get(account);
      if (!t || t.spent_nano !== a.nano || t.request_count !== a.n) totalsMismatch++;
      const live = redis.accounts.get(account);
      if (!live || live.spent !== a.nano) redisMismatch++;
      const cap = a.user === null ? undefined : caps.get(a.user);
      if (cap === undefined || a.nano > cap) overCap++;
    }
    for (const live of redis.accounts.values()) if (live.reserved !== 0) stillReserved++;
    checks.push({
      name: "usage_totals = sum of rows",
      ok: totalsMismatch === 0 && totals.length === spentByAccount.size,
      detail: `${spentByAccount.size} accounts with rows, ${totals.length} totals rows, ${totalsMismatch} differ`,
    });
    checks.push({ name: "Redis spent = sum of rows", ok: redisMismatch === 0, detail: `${redisMismatch} of ${spentByAccount.size} accounts differ` });
    checks.push({
      name: "nothing left reserved",
      ok: stillReserved === 0 && redis.openReservations === 0,
      detail: `${redis.openReservations} br:* keys, ${stillReserved} accounts with reserved ≠ 0`,
    });
    checks.push({ name: "spend within every cap", ok: overCap === 0, detail: `${overCap} accounts over their cap` });

    return {
      checks,
      facts: {
        rows: rows.length,
        rowsByStatus,
        rowsBySource,
        servedByMock: served.byId.size,
        completedAtClient: tally.completed.size,
        refusedAtClient: tally.refused.length,
        pageSize,
        walAutocheckpointPages,
      },
    };
  } finally {
    db.close();
  }
}
