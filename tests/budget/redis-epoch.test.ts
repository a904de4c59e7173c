/**
 * The Redis counters' epoch (src/store/redis/budget-scripts.ts, counters-epoch.ts), on a real
 * redis-server that keeps RDB snapshots: data lost or rolled back is never admitted against;
 * a rebuild after a loss reads the journal only once calls reserved before the loss are in it;
 * a call whose journal entry came late asks whether its hold survived.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import Redis from "ioredis";
import { RedisBudgetLedger } from "../../src/store/redis/budget-ledger";
import { CountersEpoch } from "../../src/store/redis/counters-epoch";
import { CONFIRM_AFTER_MS, REBUILD_WAIT_MS } from "../../src/store/redis/budget-scripts";
import { memoryLogger } from "../../src/logger";
import { warnIfEvicting } from "../../src/store/redis/engine";
import { startRedis, type TestRedis } from "../helpers/redis";
import { fakeTruth, type FakeTruth } from "../helpers/redis-truth";

let redis: TestRedis;
const clients: Redis[] = [];
beforeAll(async () => {
  redis = await startRedis({ snapshots: true });
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await redis.stop();
});

async function ledgerOn(store: FakeTruth): Promise<RedisBudgetLedger> {
  const client = new Redis(redis.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: (n) => Math.min(50 * n, 500) });
  client.on("error", () => {});
  clients.push(client);
  if (client.status !== "ready") await new Promise((resolve) => client.once("ready", resolve));
  const ledger = new RedisBudgetLedger(client, store, memoryLogger());
  await ledger.lease.renew();
  return ledger;
}

/** Retries while the ledger answers 503 (its client reconnecting after a restart). */
async function eventually<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (attempt > 200) throw err;
      await Bun.sleep(25);
    }
  }
}

let seq = 0;
const fresh = (label: string) => `${label}-${Date.now().toString(36)}-${seq++}`;

test("restarted from an older snapshot, the counters are rebuilt from the store, not taken as the snapshot has them", async () => {
  const store = fakeTruth();
  const ledger = await ledgerOn(store);
  const account = fresh("acct");
  for (let i = 0; i < 3; i++) {
    const id = fresh("req");
    await ledger.reserve(account, id, 10_000, 100, 1000);
    store.writeRow(account, id, 700);
    await ledger.settle(id, 700);
  }
  const old = await redis.snapshot();
  const later = fresh("req");
  await ledger.reserve(account, later, 10_000, 100, 1000);
  store.writeRow(account, later, 900);
  await ledger.settle(later, 900);
  const running = fresh("req");
  await ledger.reserve(account, running, 10_000, 100, 2000);
  store.journalCall(account, running, 2000, ledger.lease.id, 10_000);
  expect(await ledger.snapshot(account)).toEqual({ spentNano: 3000, reservedNano: 2000 });

  await redis.restore(old);
  // The snapshot holds 2,100 spent and nothing reserved: trusted, it would admit 7,900 more.
  expect(await eventually(() => ledger.snapshot(account))).toEqual({ spentNano: 3000, reservedNano: 2000 });
  expect(await ledger.reserve(account, fresh("req"), 10_000, 5001, 6000)).toMatchObject({ ok: false, spentNano: 3000, reservedNano: 2000 });
  // The call that ran through the restore settles in the rebuilt account, once.
  store.writeRow(account, running, 1500);
  await ledger.settle(running, 1500);
  await ledger.settle(running, 1500);
  expect(await ledger.snapshot(account)).toEqual({ spentNano: 4500, reservedNano: 0 });
});

test("after a loss, no account is rebuilt before the epoch's wait is over, so calls reserved before it are journaled", async () => {
  const store = fakeTruth();
  const ledger = await ledgerOn(store);
  const account = fresh("acct");
  await ledger.reserve(account, fresh("req"), 10_000, 100, 1000);
  await store.claimFirstEpoch(); // this store has been served by counters in Redis before (the shared Redis's epoch came from another test)
  const loadsAt: number[] = [];
  const load = store.load;
  store.load = async (a) => {
    loadsAt.push(Date.now());
    return load(a);
  };
  const admin = redis.client();
  await admin.flushall();
  expect(await ledger.reserve(account, fresh("req"), 10_000, 100, 1000)).toMatchObject({ ok: true });
  const marker = (await admin.get(CountersEpoch.key))!;
  admin.disconnect();
  const readyAt = Number(marker.slice(marker.lastIndexOf(":") + 1));
  expect(loadsAt).toHaveLength(1);
  // Redis's clock and this process's are the machine's.
  expect(loadsAt[0]!).toBeGreaterThanOrEqual(readyAt);
  expect(REBUILD_WAIT_MS).toBeGreaterThan(CONFIRM_AFTER_MS);
});

test("a call journaled late asks whether its hold survived: not after a loss, yes otherwise", async () => {
  const store = fakeTruth();
  const ledger = await ledgerOn(store);
  const account = fresh("acct");
  const quick = fresh("req");
  await ledger.reserve(account, quick, 10_000, 100, 1000);
  expect(await ledger.confirmHeld(quick)).toBe(true);

  const kept = fresh("req");
  const lost = fresh("req");
  await ledger.reserve(account, kept, 10_000, 100, 1000);
  await Bun.sleep(CONFIRM_AFTER_MS);
  expect(await ledger.confirmHeld(kept)).toBe(true);

  await ledger.reserve(account, lost, 10_000, 100, 1000);
  const admin = redis.client();
  await admin.flushall();
  admin.disconnect();
  await Bun.sleep(CONFIRM_AFTER_MS);
  // Its journal entry came too late for a rebuild to be sure to count it: it must not go upstream.
  expect(await ledger.confirmHeld(lost)).toBe(false);
});

test("a Redis that may evict keys is named at start; one that may not is not", async () => {
  const evicting = await startRedis({ args: ["--maxmemory-policy", "allkeys-lru"] });
  try {
    for (const [server, warned] of [
      [evicting, true],
      [redis, false],
    ] as const) {
      const client = server.client();
      const logger = memoryLogger();
      await warnIfEvicting(client, logger);
      client.disconnect();
      expect(logger.lines.some((l) => l.includes("noeviction"))).toBe(warned);
    }
  } finally {
    await evicting.stop();
  }
});
