/**
 * The SQLite ledger's per-user index over many users: what the maintenance thread's copy of
 * the tail costs per entry, by the tail's length, and what a user's listing costs while a
 * tail of that length waits to be copied (it scans it on the serving thread). These two pull
 * the thread's copy trigger (src/store/sqlite/maintenance.ts DEFAULT_MAINTENANCE) opposite
 * ways: a copy writes about one index page per user in it, so short copies cost more per
 * entry, and a long tail makes every listing longer.
 *
 *   taskset -c 1 bun scripts/bench/index-copies.ts [--users 10000] [--lengths 6000,16384,65536]
 *     [--entries 98304] [--prefill 200000] [--root <checkout>]
 *
 * --root: the checkout whose src/ is timed (a `git worktree` of another commit, for
 * comparisons in turns); this one by default.
 * For each length, a fresh file: `--prefill` rows over `--users` users, indexed; then
 * `--entries` more rows copied by `indexTail` a tail of that length at a time (CPU of the
 * copy alone, and the index's WAL bytes it wrote, each checkpoint run apart and not counted);
 * then one more tail of that length left uncopied and 50 users' first pages listed. One JSON
 * line per length.
 */
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { flagReader } from "./lib/flags";
import { benchLedgerRow } from "./lib/ledger-row";
import { REPO_ROOT } from "./lib/proc";
import type * as SqliteStore from "../../src/store/sqlite";
import type * as UserIndex from "../../src/store/sqlite/user-index";
import type * as MaintenanceWorker from "../../src/store/sqlite/maintenance-worker";

const flag = flagReader();
const root = resolve(flag("root", REPO_ROOT));
const { openSqliteStore } = (await import(join(root, "src/store/sqlite"))) as typeof SqliteStore;
const { userIndexPath } = (await import(join(root, "src/store/sqlite/user-index"))) as typeof UserIndex;
const { attachLedger, indexTail } = (await import(join(root, "src/store/sqlite/maintenance-worker"))) as typeof MaintenanceWorker;
const users = Number(flag("users", "10000"));
const lengths = flag("lengths", "6000,16384,65536").split(",").map(Number);
const entriesPerLength = Number(flag("entries", "98304"));
const prefill = Number(flag("prefill", "200000"));
const LISTINGS = 50;

/** TRUNCATE: the WAL starts over empty, so its size afterwards is what one copy wrote. */
const truncateWal = (db: Database) => db.query("PRAGMA main.wal_checkpoint(TRUNCATE)").get();

for (const length of lengths) {
  const dir = mkdtempSync(join(tmpdir(), "bench-index-copies-"));
  try {
    const path = join(dir, "proxy.sqlite");
    const store = openSqliteStore(path);
    // The thread's own connection, as maintenance-worker.ts opens it.
    const index = new Database(userIndexPath(path), { strict: true });
    index.exec("PRAGMA synchronous = NORMAL");
    attachLedger(index, path);
    const now = Date.now();
    let made = 0;
    const writeRows = async (count: number) => {
      for (let done = 0; done < count; done += 1000) {
        const rows = Array.from({ length: Math.min(1000, count - done) }, () => {
          const i = made++;
          return benchLedgerRow(Bun.randomUUIDv7(), `user-${i % users}`, i, now);
        });
        await store.usageLedger.insertBatch(rows);
      }
    };
    const walBytes = () => statSync(`${userIndexPath(path)}-wal`).size;

    await writeRows(prefill);
    indexTail(index);
    truncateWal(index);
    let cpuUs = 0;
    let wal = 0;
    let entries = 0;
    while (entries < entriesPerLength) {
      await writeRows(length);
      const before = process.cpuUsage();
      entries += indexTail(index);
      const used = process.cpuUsage(before);
      cpuUs += used.user + used.system;
      wal += walBytes();
      truncateWal(index);
    }

    await writeRows(length);
    const listingMs: number[] = [];
    for (let i = 0; i < LISTINGS; i++) {
      const started = performance.now();
      await store.usageLedger.listForUser("benchapp", `user-${i}`, "2026-11", 50);
      listingMs.push(performance.now() - started);
    }
    listingMs.sort((a, b) => a - b);
    console.log(
      JSON.stringify({
        root,
        users,
        tailRows: length,
        entries,
        copyCpuUsPerEntry: Math.round((cpuUs / entries) * 100) / 100,
        indexWalBytesPerEntry: Math.round(wal / entries),
        listingMsMedian: Math.round(listingMs[LISTINGS / 2]! * 100) / 100,
        listingMsMax: Math.round(listingMs[LISTINGS - 1]! * 100) / 100,
      }),
    );
    index.close();
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
