/**
 * The Redis ledger's settles go to Redis in batches (src/store/redis/settle-batch.ts): many
 * settles at once take far fewer script calls than settles, each still exact; a batch that
 * failed is sent again, and one whose answer was lost after Redis ran it counts once.
 * On a real redis-server.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Redis from "ioredis";
import { RedisBudgetLedger } from "../../src/store/redis/budget-ledger";
import { memoryLogger } from "../../src/logger";
import { startRedis, type TestRedis } from "../helpers/redis";
import { fakeTruth } from "../helpers/redis-truth";

let redis: TestRedis;
const clients: Redis[] = [];

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await redis.stop();
});

/**
 * Auto-pipelining as in production; off for a client whose batches a test makes fail (an
 * auto-pipelined script call goes through the instance's own method, which the wrapper replaces).
 */
async function client(autoPipelining = true): Promise<Redis> {
  const c = new Redis(redis.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, enableAutoPipelining: autoPipelining });
  c.on("error", () => {});
  clients.push(c);
  if (c.status !== "ready") await new Promise((resolve) => c.once("ready", resolve));
  return c;
}

async function ledgerOn(c: Redis): Promise<RedisBudgetLedger> {
  const ledger = new RedisBudgetLedger(c, fakeTruth(), memoryLogger());
  ledger.lease.stop();
  return ledger;
}

type SettleMany = (...args: Array<string | number>) => Promise<number[]>;

/** Makes the next `failures` batches fail: before Redis sees them, or (`afterRunning`) once Redis has run them. */
function failNextBatches(c: Redis, failures: number, afterRunning: boolean): void {
  const target = c as unknown as { budgetSettleMany: SettleMany };
  const real = target.budgetSettleMany.bind(c);
  let left = failures;
  target.budgetSettleMany = async (...args) => {
    if (left <= 0) return real(...args);
    left--;
    if (afterRunning) await real(...args);
    throw new Error("Command timed out");
  };
}

/** Bounded wait for the background retry (it runs a second after a failure). */
async function retried(ledger: RedisBudgetLedger): Promise<void> {
  for (let i = 0; i < 100 && ledger.pendingSettles > 0; i++) await Bun.sleep(50);
  expect(ledger.pendingSettles).toBe(0);
}

let seq = 0;
const fresh = (label: string) => `${label}-${Date.now().toString(36)}-${seq++}`;

describe("RedisBudgetLedger settles in batches", () => {
  test("200 settles at once take a few script calls, and each lands exactly", async () => {
    const ledger = await ledgerOn(await client());
    const account = fresh("acct");
    const ids = Array.from({ length: 200 }, (_, i) => `${fresh("req")}-${i}`);
    for (const id of ids) expect(await ledger.reserve(account, id, 1_000_000, 1, 1000)).toEqual({ ok: true, grantedNano: 1000 });
    const before = ledger.settles.batchesSent;
    await Promise.all(ids.map((id, i) => ledger.settle(id, i)));
    const batches = ledger.settles.batchesSent - before;
    expect(batches).toBeGreaterThanOrEqual(1);
    expect(batches).toBeLessThanOrEqual(4); // the first alone, then what queued behind it, 128 at most each
    expect(await ledger.snapshot(account)).toEqual({ spentNano: (199 * 200) / 2, reservedNano: 0 });
    // Idempotent as ever: the same settles again change nothing.
    await Promise.all(ids.map((id) => ledger.settle(id, 999)));
    expect(await ledger.snapshot(account)).toEqual({ spentNano: (199 * 200) / 2, reservedNano: 0 });
  });

  test("settles of several accounts and an overrun share a batch; the overrun still freezes its account", async () => {
    const ledger = await ledgerOn(await client());
    const [x, y] = [fresh("acct-x"), fresh("acct-y")];
    const r = fresh("req");
    await ledger.reserve(x, `${r}-x1`, 1000, 1, 100);
    await ledger.reserve(x, `${r}-x2`, 1000, 1, 100);
    await ledger.reserve(y, `${r}-y1`, 1000, 1, 100);
    await Promise.all([ledger.settle(`${r}-x1`, 40), ledger.settle(`${r}-x2`, 60), ledger.settle(`${r}-y1`, 150)]);
    expect(await ledger.snapshot(x)).toEqual({ spentNano: 100, reservedNano: 0 });
    expect(await ledger.snapshot(y)).toEqual({ spentNano: 150, reservedNano: 0 });
    expect(await ledger.reserve(y, `${r}-y2`, 1000, 1, 10)).toMatchObject({ ok: false, frozen: true });
    expect(await ledger.reserve(x, `${r}-x3`, 1000, 1, 10)).toEqual({ ok: true, grantedNano: 10 });
  });

  test("a batch that failed before Redis saw it is sent again: every settle lands once", async () => {
    const c = await client(false);
    const ledger = await ledgerOn(c);
    const account = fresh("acct");
    const ids = Array.from({ length: 50 }, (_, i) => `${fresh("req")}-${i}`);
    for (const id of ids) await ledger.reserve(account, id, 1_000_000, 1, 1000);
    failNextBatches(c, 1, false);
    await Promise.all(ids.map((id) => ledger.settle(id, 10)));
    expect(ledger.pendingSettles).toBeGreaterThan(0);
    await retried(ledger);
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 500, reservedNano: 0 });
  });

  test("a batch Redis ran but whose answer was lost is sent again and counts once", async () => {
    const c = await client(false);
    const ledger = await ledgerOn(c);
    const account = fresh("acct");
    const ids = Array.from({ length: 50 }, (_, i) => `${fresh("req")}-${i}`);
    for (const id of ids) await ledger.reserve(account, id, 1_000_000, 1, 1000);
    failNextBatches(c, 2, true);
    await Promise.all(ids.map((id) => ledger.settle(id, 10)));
    expect(ledger.pendingSettles).toBeGreaterThan(0);
    await retried(ledger);
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 500, reservedNano: 0 });
    // Nothing left held by this process either: its lease's `held` hash is empty.
    expect(await c.hlen(`bp:held:${ledger.lease.id}`)).toBe(0);
  });
});

describe("RedisBudgetLedger reserves", () => {
  test("a reserve Redis ran but whose answer was lost gives its hold back: the call was refused", async () => {
    const c = await client(false);
    const ledger = await ledgerOn(c);
    const account = fresh("acct");
    await ledger.reserve(account, fresh("req"), 1_000_000, 1, 10); // the account loaded
    const target = c as unknown as { fcall: (...args: unknown[]) => Promise<unknown> };
    const real = target.fcall.bind(c);
    target.fcall = async (...args) => {
      target.fcall = real;
      await real(...args);
      throw new Error("Command timed out");
    };
    await expect(ledger.reserve(account, fresh("req"), 1_000_000, 1, 1000)).rejects.toMatchObject({ code: "unavailable" });
    expect(ledger.pendingSettles).toBe(1);
    await retried(ledger);
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 10 });
  });
});
