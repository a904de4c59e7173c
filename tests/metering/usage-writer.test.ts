import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite";
import { UsageWriter } from "../../src/metering/usage-writer";
import { memoryLogger } from "../../src/logger";
import { usageRow } from "../helpers/usage-rows";

let dir: string;
let store: SqliteStore | undefined;

const row = (i: number) => usageRow(i);

function freshStore(): SqliteStore {
  dir = mkdtempSync(join(tmpdir(), "usage-writer-"));
  store = openSqliteStore(join(dir, "proxy.sqlite"));
  return store;
}

/** Polls until `done` holds; fails after `withinMs`. */
async function until(done: () => boolean, withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${withinMs} ms`);
    await Bun.sleep(1);
  }
}

afterEach(async () => {
  await store?.close();
  store = undefined;
  rmSync(dir, { recursive: true, force: true });
});

describe("UsageWriter on a real SQLite file", () => {
  test("durable rows of one turn commit together, without the interval, and each caller learns when its row is on disk", async () => {
    const s = freshStore();
    const writer = new UsageWriter(s.usageLedger, memoryLogger(), 10_000, 1000);
    writer.enqueue(row(0));
    const durable = [1, 2, 3].map((i) => writer.enqueueDurable(row(i)));
    expect(writer.stats.written).toBe(0);
    expect(await Promise.all(durable)).toEqual([true, true, true]);
    // One transaction, with the plain row queued before them: nothing waited 10 s.
    expect(writer.stats).toMatchObject({ written: 4, flushes: 1, pending: 0 });
    expect(await s.usageLedger.find("req-3")).not.toBeNull();
  });

  test("a durable row whose batch fails resolves false and stays queued; the retry writes it", async () => {
    const s = freshStore();
    const writer = new UsageWriter(s.usageLedger, memoryLogger(), 10_000, 1000);
    s.db.exec("ALTER TABLE usage_totals RENAME TO usage_totals_away");
    expect(await writer.enqueueDurable(row(1))).toBe(false);
    expect(writer.stats).toMatchObject({ written: 0, pending: 1, failedFlushes: 1 });
    s.db.exec("ALTER TABLE usage_totals_away RENAME TO usage_totals");
    await writer.close();
    expect(writer.stats).toMatchObject({ written: 1, pending: 0 });
  });

  test("a durable row queued behind a batch that keeps failing resolves false at the next failure, not when a batch works", async () => {
    const s = freshStore();
    const writer = new UsageWriter(s.usageLedger, memoryLogger(), 10_000, 1000);
    s.db.exec("ALTER TABLE usage_totals RENAME TO usage_totals_away");
    // The first failure halves the batch to one row, so the next batches take the refused row alone.
    expect(await writer.enqueueDurable(row(1))).toBe(false);
    writer.enqueue(row(2));
    expect(await writer.enqueueDurable(row(3))).toBe(false);
    expect(writer.stats).toMatchObject({ written: 0, pending: 3 });
    s.db.exec("ALTER TABLE usage_totals_away RENAME TO usage_totals");
    await writer.close();
    expect(writer.stats).toMatchObject({ written: 3, pending: 0 });
  });

  test("a full batch is written at once, rows and totals in the same transaction", async () => {
    const s = freshStore();
    const writer = new UsageWriter(s.usageLedger, memoryLogger(), 10_000, 100);
    for (let i = 0; i < 100; i++) writer.enqueue(row(i));
    // The write is under way without waiting for the 10 s interval: no flush() call here.
    await until(() => writer.stats.written > 0, 1000);
    expect(writer.stats).toMatchObject({ pending: 0, written: 100, flushes: 1 });
    expect(await s.usageTotals.spentNano("u/app1/2026-01/alice")).toBe(Array.from({ length: 100 }, (_, i) => 1000 + i).reduce((a, b) => a + b));
  });

  test("batches are written one per turn of the event loop, none inline from enqueue", async () => {
    const s = freshStore();
    const writer = new UsageWriter(s.usageLedger, memoryLogger(), 10_000, 100);
    const rowsInFile = () => (s.db.query("SELECT count(*) AS n FROM usage_ledger").get() as { n: number }).n;
    for (let i = 0; i < 300; i++) writer.enqueue(row(i));
    // A full queue starts the write, but the request that filled it does not pay for it.
    expect(rowsInFile()).toBe(0);
    let writtenWhenOtherWorkRan = -1;
    setImmediate(() => (writtenWhenOtherWorkRan = rowsInFile()));
    await writer.flush();
    // Work queued meanwhile (a request's I/O) ran between two batches, not after all three.
    expect(writtenWhenOtherWorkRan).toBeGreaterThan(0);
    expect(writtenWhenOtherWorkRan).toBeLessThan(300);
    expect(rowsInFile()).toBe(300);
  });

  test("a partial batch is written when the interval passes", async () => {
    const s = freshStore();
    const writer = new UsageWriter(s.usageLedger, memoryLogger(), 5, 1000);
    writer.enqueue(row(1));
    expect(writer.stats.pending).toBe(1);
    while (writer.stats.pending > 0) await Bun.sleep(5);
    expect((await s.usageLedger.find("req-1"))?.costNano).toBe(1001);
  });

  test("a replayed request id is not counted twice", async () => {
    const s = freshStore();
    const writer = new UsageWriter(s.usageLedger, memoryLogger(), 10_000, 1000);
    writer.enqueue(row(7));
    writer.enqueue(row(7));
    await writer.close();
    writer.enqueue(row(7));
    await writer.close();
    expect(await s.usageTotals.spentNano("u/app1/2026-01/alice")).toBe(1007);
    expect(s.db.query("SELECT count(*) AS n FROM usage_ledger").get()).toEqual({ n: 1 });
  });

  test("close() drains what is queued", async () => {
    const s = freshStore();
    const writer = new UsageWriter(s.usageLedger, memoryLogger(), 60_000, 1000);
    for (let i = 0; i < 10; i++) writer.enqueue(row(i));
    await writer.close();
    expect(s.db.query("SELECT count(*) AS n FROM usage_ledger").get()).toEqual({ n: 10 });
  });

  test("a failed flush keeps its rows and they are written later", async () => {
    const s = freshStore();
    const logger = memoryLogger();
    const writer = new UsageWriter(s.usageLedger, logger, 60_000, 1000);
    s.db.exec("ALTER TABLE usage_totals RENAME TO usage_totals_away");
    writer.enqueue(row(1));
    await writer.flush();
    expect(writer.stats).toMatchObject({ pending: 1, failedFlushes: 1 });
    s.db.exec("ALTER TABLE usage_totals_away RENAME TO usage_totals");
    await writer.close();
    expect(writer.stats).toMatchObject({ pending: 0, written: 1 });
    expect(await s.usageTotals.spentNano("u/app1/2026-01/alice")).toBe(1001);
  });
});
