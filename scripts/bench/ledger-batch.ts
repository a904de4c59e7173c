/**
 * The SQLite ledger's batch write alone (SqliteUsageLedgerRepository.insertBatch: the rows,
 * their totals and the journal's end of each, in one transaction), without the usage
 * writer's queue or the maintenance thread beside it: the CPU it costs per row.
 *
 *   taskset -c 1 bun scripts/bench/ledger-batch.ts [--root <checkout>] [--batches 100]
 *     [--rows 1000] [--accounts 1000]
 *
 * --root: the checkout whose src/ is timed (a `git worktree` of another commit, for
 * comparisons in turns); this one by default. A real file in a temp dir with the service's
 * migrations and pragmas; 20 batches first, untimed. Prints one JSON line: CPU (user +
 * system) and wall µs per row over the timed batches.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { flagReader } from "./lib/flags";
import { REPO_ROOT } from "./lib/proc";
import { benchLedgerRow } from "./lib/ledger-row";
import type { UsageRow } from "../../src/budget/usage-row";
import type { openSqliteStore as OpenSqliteStore } from "../../src/store/sqlite";

const flag = flagReader();
const root = resolve(flag("root", REPO_ROOT));
const batches = Number(flag("batches", "100"));
const rowsPerBatch = Number(flag("rows", "1000"));
const accounts = Number(flag("accounts", "1000"));

const { openSqliteStore } = (await import(join(root, "src/store/sqlite"))) as { openSqliteStore: typeof OpenSqliteStore };
const dir = mkdtempSync(join(tmpdir(), "bench-ledger-batch-"));
try {
  const store = openSqliteStore(join(dir, "proxy.sqlite"));
  const now = Date.now();
  let made = 0;
  const batch = (): UsageRow[] =>
    Array.from({ length: rowsPerBatch }, () => {
      const i = made++;
      return benchLedgerRow(Bun.randomUUIDv7(), `user-${i % accounts}`, i, now);
    });
  for (let i = 0; i < 20; i++) await store.usageLedger.insertBatch(batch());
  const timed = Array.from({ length: batches }, batch);
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  for (const rows of timed) await store.usageLedger.insertBatch(rows);
  const cpu = process.cpuUsage(cpuBefore);
  const wallMs = performance.now() - started;
  const rows = batches * rowsPerBatch;
  console.log(
    JSON.stringify({
      root,
      rows,
      accounts,
      cpuUsPerRow: Math.round(((cpu.user + cpu.system) / rows) * 1000) / 1000,
      wallUsPerRow: Math.round(((wallMs * 1000) / rows) * 1000) / 1000,
    }),
  );
  await store.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
