/**
 * The embedded ledger forgetting idle accounts (InMemoryBudgetLedger.forgetIdle) beside the
 * real usage writer on a real SQLite file: calls reserve, settle at their whole reservation
 * and queue their row as the meter does (src/metering/meter.ts), while sweeps run as often
 * as the event loop allows and the writer's batches land in between. Were an account
 * forgotten before its rows were written, loading it again would give back less spend, and
 * more would be granted than its cap: the settled sum of each account is checked against its
 * cap, and against the totals the writer kept.
 */
import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite";
import { UsageWriter } from "../../src/metering/usage-writer";
import { InMemoryBudgetLedger } from "../../src/budget/ledger";
import { memoryLogger } from "../../src/logger";
import { usageRow } from "../helpers/usage-rows";
import { fixedRandom } from "../helpers/fixed-random";

let dir: string;
let store: SqliteStore | undefined;

afterEach(async () => {
  await store?.close();
  store = undefined;
  rmSync(dir, { recursive: true, force: true });
});

test("sweeps beside the writer's batches never let a cap be passed, and the totals agree", async () => {
  dir = mkdtempSync(join(tmpdir(), "idle-accounts-"));
  store = openSqliteStore(join(dir, "proxy.sqlite"));
  const s = store;
  // A batch every 40 ms, sweeps every few: rows are often unwritten when a sweep reads the totals.
  const writer = new UsageWriter(s.usageLedger, memoryLogger(), 40, 1000);
  const ledger = new InMemoryBudgetLedger(
    (account) => s.usageTotals.spentNano(account),
    (account) => s.usageTotals.frozenCapNano(account),
  );
  const CAP = 20_000;
  const users = Array.from({ length: 8 }, (_, i) => `user-${i}`);
  const random = fixedRandom(7);
  const settled = new Map<string, number>();
  let forgotten = 0;
  let sweeping = true;
  const sweeps = (async () => {
    while (sweeping) {
      forgotten += await ledger.forgetIdle();
      await Bun.sleep(random(3));
    }
  })();

  let next = 0;
  const call = async (user: string) => {
    const i = next++;
    const row = usageRow(i, user);
    const outcome = await ledger.reserve(row.account, row.requestId, CAP, 100, 100 + random(2_000));
    if (!outcome.ok) return;
    await Bun.sleep(random(4));
    // As the meter records a queued row: the settle, then the row, in the same turn.
    await ledger.settle(row.requestId, outcome.grantedNano);
    writer.enqueue({ ...row, costNano: outcome.grantedNano });
    settled.set(row.account, (settled.get(row.account) ?? 0) + outcome.grantedNano);
  };
  // Waves of calls on a few users each, so that the others sit idle for rounds.
  for (let wave = 0; wave < 100; wave++) {
    const active = users.filter(() => random(3) === 0);
    await Promise.all(active.flatMap((user) => Array.from({ length: 1 + random(4) }, () => call(user))));
    await Bun.sleep(random(8));
  }
  sweeping = false;
  await sweeps;
  await writer.close();

  expect(forgotten).toBeGreaterThan(5);
  for (const [account, spent] of settled) {
    expect({ account, withinCap: spent <= CAP }).toEqual({ account, withinCap: true });
    expect({ account, totals: await s.usageTotals.spentNano(account) }).toEqual({ account, totals: spent });
    expect({ account, ...(await ledger.snapshot(account)) }).toEqual({ account, spentNano: spent, reservedNano: 0 });
  }
  // Enough calls were refused for the caps to have been in play.
  expect([...settled.values()].filter((spent) => spent > CAP - 2_100).length).toBeGreaterThan(2);
});
