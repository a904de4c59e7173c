/**
 * What a process that dies without settling leaves in the shared Redis budgets, and its
 * reclaim (src/store/redis/process-lease.ts), on a real redis-server: its holds stay
 * counted, as orphans, until the reconciler settles each (with `settle`, from any process). Two ledgers stand
 * for two processes; "dying" is deleting a ledger's lease key, which is what its expiry
 * does, so no test waits for the lease's real lifetime. The ledgers' background renewal and
 * sweep are stopped: each test renews and sweeps by hand, so nothing races with it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Redis from "ioredis";
import { RedisBudgetLedger } from "../../src/store/redis/budget-ledger";
import { leaseKeyOf } from "../../src/store/redis/process-lease";
import { memoryLogger } from "../../src/logger";
import { startRedis, type TestRedis } from "../helpers/redis";
import { fakeTruth, type FakeTruth } from "../helpers/redis-truth";

let redis: TestRedis;
const clients: Redis[] = [];

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await redis.stop();
});

/** A ledger on its own client (a process), whose rebuilds read `store`. */
async function processLedger(store: FakeTruth): Promise<RedisBudgetLedger> {
  const client = new Redis(redis.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0 });
  client.on("error", () => {});
  clients.push(client);
  if (client.status !== "ready") await new Promise((resolve) => client.once("ready", resolve));
  const ledger = new RedisBudgetLedger(client, store, memoryLogger());
  ledger.lease.stop();
  await ledger.lease.renew();
  return ledger;
}

/** `by` renews its own lease (it is alive) and sweeps; resolves with the holds released. */
async function sweep(by: RedisBudgetLedger): Promise<number> {
  await by.lease.renew();
  return by.lease.sweep();
}

/** Its lease runs out. */
async function expire(ledger: RedisBudgetLedger): Promise<void> {
  const admin = redis.client();
  await admin.del(leaseKeyOf(ledger.lease.id));
  admin.disconnect();
}

let seq = 0;
const fresh = (label: string) => `${label}-${Date.now().toString(36)}-${seq++}`;

describe("a process that dies holding reservations", () => {
  test("its holds become orphans once its lease runs out, not before, and stay counted until settled; live holds stay counted", async () => {
    const account = fresh("acct");
    const store = fakeTruth();
    const dying = await processLedger(store);
    const live = await processLedger(store);
    const dyingRequest = fresh("req");
    expect(await dying.reserve(account, dyingRequest, 1000, 100, 300)).toEqual({ ok: true, grantedNano: 300 });
    expect(await live.reserve(account, fresh("req"), 1000, 100, 200)).toEqual({ ok: true, grantedNano: 200 });

    // Alive (its lease is there): a sweep leaves it alone.
    await dying.lease.renew();
    await sweep(live);
    expect(await live.orphans()).not.toContain(dyingRequest);
    expect(await live.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 500 });

    await expire(dying);
    expect(await sweep(live)).toBeGreaterThanOrEqual(1);
    expect(await live.orphans()).toContain(dyingRequest);
    // Still held: the call may have been billed upstream.
    expect(await live.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 500 });
    // The reconciler releases it (its call never went upstream): once.
    await live.settle(dyingRequest, 0);
    expect(await live.orphans()).not.toContain(dyingRequest);
    expect(await live.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 200 });
    await live.settle(dyingRequest, 0);
    await sweep(live);
    expect(await live.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 200 });
  });

  test("an orphan settled after its call's row is written counts the row's cost, from the store", async () => {
    const account = fresh("acct");
    const store = fakeTruth();
    const dying = await processLedger(store);
    const live = await processLedger(store);
    const request = fresh("req");
    await dying.reserve(account, request, 1000, 100, 600);
    await expire(dying);
    await sweep(live);
    // The reconciler writes the call's row, then settles the orphan.
    store.writeRow(account, request, 420);
    await live.settle(request, 420);
    expect(await live.snapshot(account)).toEqual({ spentNano: 420, reservedNano: 0 });
  });

  test("what it settled stays counted: a hold is settled only once its row is in the store, so nothing is reloaded", async () => {
    const account = fresh("acct");
    const store = fakeTruth();
    const dying = await processLedger(store);
    const live = await processLedger(store);
    const written = fresh("req");
    await dying.reserve(account, written, 10_000, 100, 1000);
    store.writeRow(account, written, 400);
    await dying.settle(written, 400);
    const liveRequest = fresh("req");
    await live.reserve(account, liveRequest, 10_000, 100, 1000);
    expect(await live.snapshot(account)).toEqual({ spentNano: 400, reservedNano: 1000 });

    await expire(dying);
    await sweep(live);
    expect(await live.snapshot(account)).toEqual({ spentNano: 400, reservedNano: 1000 });
    // The live process's hold settles as usual.
    store.writeRow(account, liveRequest, 250);
    await live.settle(liveRequest, 250);
    expect(await live.snapshot(account)).toEqual({ spentNano: 650, reservedNano: 0 });
  });

  test("a process that was only slow (its lease ran out, then it settled) has its cost counted once", async () => {
    const account = fresh("acct");
    const store = fakeTruth();
    const slow = await processLedger(store);
    const other = await processLedger(store);
    const request = fresh("req");
    await slow.reserve(account, request, 1000, 100, 600);
    await expire(slow);
    expect(await sweep(other)).toBeGreaterThanOrEqual(1);
    // An orphan now; the hold stays.
    expect(await other.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 600 });

    await slow.settle(request, 450);
    await slow.settle(request, 450); // idempotent as ever
    expect(await other.snapshot(account)).toEqual({ spentNano: 450, reservedNano: 0 });
    // Its own settle took it off the orphans: no reconciler releases it a second time.
    expect(await other.orphans()).not.toContain(request);
    await other.settle(request, 0);
    expect(await other.reserve(account, fresh("req"), 1000, 600, 600)).toMatchObject({ ok: false, spentNano: 450, reservedNano: 0 });
  });
});

describe("a process that stops cleanly", () => {
  test("leaves the registry at once when it holds nothing", async () => {
    const account = fresh("acct");
    const store = fakeTruth();
    const leaving = await processLedger(store);
    const live = await processLedger(store);
    const done = fresh("req");
    await leaving.reserve(account, done, 10_000, 100, 1000);
    store.writeRow(account, done, 300);
    await leaving.settle(done, 300);
    const other = fresh("req");
    await live.reserve(account, other, 10_000, 100, 1000);
    store.writeRow(account, other, 200);
    await live.settle(other, 200);

    await leaving.close();
    await expire(leaving);
    expect(await sweep(live)).toBe(0);
    expect(await live.snapshot(account)).toEqual({ spentNano: 500, reservedNano: 0 });
  });

  test("stays registered while it still holds a reservation, so that hold becomes an orphan later", async () => {
    const account = fresh("acct");
    const store = fakeTruth();
    const leaving = await processLedger(store);
    const live = await processLedger(store);
    const request = fresh("req");
    await leaving.reserve(account, request, 10_000, 100, 1000);
    await leaving.close();
    await expire(leaving);
    expect(await sweep(live)).toBe(1);
    expect(await live.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 1000 });
    await live.settle(request, 0);
    expect(await live.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 0 });
  });
});
