/**
 * The BudgetLedger contract (src/budget/ledger.ts), one suite run against both
 * implementations: the in-process ledger and the Redis ledger on a real redis-server.
 * Redis-only cases follow: data loss (FLUSHALL) and Redis being down.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Redis from "ioredis";
import { InMemoryBudgetLedger, type BudgetLedger } from "../../src/budget/ledger";
import { RedisBudgetLedger } from "../../src/store/redis/budget-ledger";
import { ApiError } from "../../src/errors";
import { memoryLogger } from "../../src/logger";
import { startRedis, type TestRedis } from "../helpers/redis";
import { fakeTruth } from "../helpers/redis-truth";

/** What the durable store says each account has spent; the ledger's loader reads it. */
type Durable = Map<string, number>;

interface Subject {
  /** A ledger whose loader reads `durable`, and which records every account it loads. */
  make(durable: Durable, loads: string[], frozen?: Durable): Promise<BudgetLedger>;
}

let redis: TestRedis;
const clients: Redis[] = [];

/** An ioredis client configured like src/deps.ts createRedis: fail fast, reconnect by itself. */
async function redisClient(): Promise<Redis> {
  const client = new Redis(redis.url, {
    commandTimeout: 250,
    connectTimeout: 1000,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(100 * attempt, 1000),
  });
  client.on("error", () => {});
  clients.push(client);
  if (client.status !== "ready") await new Promise((resolve) => client.once("ready", resolve));
  return client;
}

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await redis.stop();
});

const loaderOf = (durable: Durable, loads: string[]) => async (account: string) => {
  loads.push(account);
  return durable.get(account) ?? 0;
};

const frozenLoaderOf = (frozen: Durable) => async (account: string) => frozen.get(account) ?? null;

const SUBJECTS: Record<string, Subject> = {
  memory: { make: async (durable, loads, frozen = new Map()) => new InMemoryBudgetLedger(loaderOf(durable, loads), frozenLoaderOf(frozen)) },
  redis: {
    make: async (durable, loads, frozen = new Map()) =>
      new RedisBudgetLedger(await redisClient(), fakeTruth({ spent: durable, frozen, loads }), memoryLogger()),
  },
};

/** Accounts and request ids unique per test, so tests sharing one Redis never meet. */
let seq = 0;
const fresh = (label: string) => `${label}-${Date.now().toString(36)}-${seq++}`;

for (const [kind, subject] of Object.entries(SUBJECTS)) {
  describe(`BudgetLedger contract (${kind})`, () => {
    test("grants the most that fits between min and desired; refuses below min with the counters", async () => {
      const ledger = await subject.make(new Map(), []);
      const account = fresh("acct");
      const r = fresh("req");
      expect(await ledger.reserve(account, `${r}-1`, 1000, 100, 700)).toEqual({ ok: true, grantedNano: 700 });
      // Only 300 left: less than desired, more than min → the rest.
      expect(await ledger.reserve(account, `${r}-2`, 1000, 100, 700)).toEqual({ ok: true, grantedNano: 300 });
      expect(await ledger.reserve(account, `${r}-3`, 1000, 1, 700)).toEqual({ ok: false, spentNano: 0, reservedNano: 1000 });
      expect(await ledger.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 1000 });
    });

    test("refuses when what is left is below min, even if something is left", async () => {
      const ledger = await subject.make(new Map(), []);
      const account = fresh("acct");
      const r = fresh("req");
      expect(await ledger.reserve(account, `${r}-1`, 1000, 100, 950)).toEqual({ ok: true, grantedNano: 950 });
      expect(await ledger.reserve(account, `${r}-2`, 1000, 51, 51)).toEqual({ ok: false, spentNano: 0, reservedNano: 950 });
      expect(await ledger.reserve(account, `${r}-3`, 1000, 50, 500)).toEqual({ ok: true, grantedNano: 50 });
    });

    test("settle replaces the reservation with the actual cost, once (idempotent)", async () => {
      const ledger = await subject.make(new Map(), []);
      const account = fresh("acct");
      const r = fresh("req");
      await ledger.reserve(account, r, 1000, 100, 700);
      await ledger.settle(r, 250);
      expect(await ledger.snapshot(account)).toEqual({ spentNano: 250, reservedNano: 0 });
      await ledger.settle(r, 250);
      await ledger.settle(r, 999);
      expect(await ledger.snapshot(account)).toEqual({ spentNano: 250, reservedNano: 0 });
      // What was freed can be reserved again.
      expect(await ledger.reserve(account, `${r}-next`, 1000, 100, 1000)).toEqual({ ok: true, grantedNano: 750 });
    });

    test("settling an unknown request id changes nothing", async () => {
      const ledger = await subject.make(new Map(), []);
      const account = fresh("acct");
      const r = fresh("req");
      await ledger.reserve(account, r, 1000, 10, 100);
      await ledger.settle(fresh("never-reserved"), 999);
      expect(await ledger.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 100 });
    });

    test("a request id holds at most one reservation", async () => {
      const ledger = await subject.make(new Map(), []);
      const account = fresh("acct");
      const r = fresh("req");
      await ledger.reserve(account, r, 1000, 10, 100);
      await expect(ledger.reserve(account, r, 1000, 10, 100)).rejects.toThrow();
      expect(await ledger.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 100 });
    });

    test("snapshot shows settled spend and in-flight reservations separately, per account", async () => {
      const ledger = await subject.make(new Map(), []);
      const [x, y] = [fresh("acct-x"), fresh("acct-y")];
      const r = fresh("req");
      await ledger.reserve(x, `${r}-1`, 1000, 10, 400);
      await ledger.reserve(x, `${r}-2`, 1000, 10, 100);
      await ledger.reserve(y, `${r}-3`, 1000, 10, 30);
      await ledger.settle(`${r}-1`, 123);
      expect(await ledger.snapshot(x)).toEqual({ spentNano: 123, reservedNano: 100 });
      expect(await ledger.snapshot(y)).toEqual({ spentNano: 0, reservedNano: 30 });
    });

    test("the initial spend is loaded from the store on first use, once per account", async () => {
      const account = fresh("acct");
      const other = fresh("acct");
      const loads: string[] = [];
      const ledger = await subject.make(new Map([[account, 900]]), loads);
      const r = fresh("req");
      expect(await ledger.reserve(account, `${r}-1`, 1000, 200, 200)).toEqual({ ok: false, spentNano: 900, reservedNano: 0 });
      expect(await ledger.reserve(account, `${r}-2`, 1000, 50, 200)).toEqual({ ok: true, grantedNano: 100 });
      expect(await ledger.snapshot(account)).toEqual({ spentNano: 900, reservedNano: 100 });
      expect(loads.filter((a) => a === account)).toHaveLength(1);
      // snapshot of a never-used account loads it too
      expect(await ledger.snapshot(other)).toEqual({ spentNano: 0, reservedNano: 0 });
      expect(loads.filter((a) => a === other)).toHaveLength(1);
    });

    test("500 concurrent reservations never exceed the cap, and fill it to within min", async () => {
      const account = fresh("acct");
      const r = fresh("req");
      // Two ledgers on one account: for Redis, two clients, as two processes would have.
      const ledgers = [await subject.make(new Map(), []), await subject.make(new Map(), [])];
      const ledgerOf = (i: number) => (kind === "redis" ? ledgers[i % 2]! : ledgers[0]!);
      const cap = 10_000;
      const results = await Promise.all(Array.from({ length: 500 }, (_, i) => ledgerOf(i).reserve(account, `${r}-${i}`, cap, 30, 70)));
      const granted = results.reduce((sum, o) => sum + (o.ok ? o.grantedNano : 0), 0);
      expect(granted).toBeLessThanOrEqual(cap);
      // Every refusal saw less than min (30) left, so the cap is filled to within 30.
      expect(granted).toBeGreaterThan(cap - 30);
      expect(results.filter((o) => !o.ok).length).toBeGreaterThan(0);
      expect(await ledgerOf(0).snapshot(account)).toEqual({ spentNano: 0, reservedNano: granted });
      // Settling everything concurrently (each by the process that reserved it) leaves exactly the actual costs.
      await Promise.all(results.map((o, i) => ledgerOf(i).settle(`${r}-${i}`, o.ok ? 10 : 0)));
      const admitted = results.filter((o) => o.ok).length;
      expect(await ledgerOf(1).snapshot(account)).toEqual({ spentNano: admitted * 10, reservedNano: 0 });
    });

    test("a cost above the reservation freezes the account at its cap: nothing more under that cap, a higher cap lifts it", async () => {
      // Two ledgers on one account: the freeze must be seen by every process sharing it.
      const ledgers = [await subject.make(new Map(), []), await subject.make(new Map(), [])];
      const other = kind === "redis" ? ledgers[1]! : ledgers[0]!;
      const account = fresh("acct");
      const r = fresh("req");
      expect(await ledgers[0]!.reserve(account, `${r}-1`, 1000, 10, 100)).toEqual({ ok: true, grantedNano: 100 });
      expect(await other.reserve(account, `${r}-2`, 1000, 10, 100)).toEqual({ ok: true, grantedNano: 100 });
      await ledgers[0]!.settle(`${r}-1`, 150);
      expect(await other.reserve(account, `${r}-3`, 1000, 1, 1)).toEqual({ ok: false, spentNano: 150, reservedNano: 100, frozen: true });
      // A call already admitted still settles as usual.
      await other.settle(`${r}-2`, 50);
      expect(await other.snapshot(account)).toEqual({ spentNano: 200, reservedNano: 0 });
      expect(await ledgers[0]!.reserve(account, `${r}-4`, 1001, 1, 1)).toEqual({ ok: true, grantedNano: 1 });
    });

    test("a settle at or below the reservation never freezes", async () => {
      const ledger = await subject.make(new Map(), []);
      const account = fresh("acct");
      const r = fresh("req");
      await ledger.reserve(account, `${r}-1`, 1000, 10, 100);
      await ledger.settle(`${r}-1`, 100);
      expect(await ledger.reserve(account, `${r}-2`, 1000, 10, 100)).toEqual({ ok: true, grantedNano: 100 });
    });

    test("a freeze recorded in the store is loaded with the account", async () => {
      const account = fresh("acct");
      const ledger = await subject.make(new Map([[account, 300]]), [], new Map([[account, 1000]]));
      expect(await ledger.reserve(account, fresh("req"), 1000, 1, 1)).toEqual({ ok: false, spentNano: 300, reservedNano: 0, frozen: true });
      expect(await ledger.reserve(account, fresh("req"), 2000, 1, 1)).toEqual({ ok: true, grantedNano: 1 });
    });
  });
}

describe("RedisBudgetLedger: data loss and outages", () => {
  test("after FLUSHALL (data loss) the next reserve reloads from the store, not from zero", async () => {
    const account = fresh("acct");
    const store = fakeTruth();
    const ledger = new RedisBudgetLedger(await redisClient(), store, memoryLogger());
    const r = fresh("req");
    expect(await ledger.reserve(account, `${r}-1`, 1000, 100, 900)).toEqual({ ok: true, grantedNano: 900 });
    store.writeRow(account, `${r}-1`, 850); // the usage writer wrote the row; then the hold is settled
    await ledger.settle(`${r}-1`, 850);
    expect(store.loads).toEqual([account]);

    const admin = redis.client();
    await admin.flushall();
    admin.disconnect();

    // Against zero this would be granted; against the store's 850 it cannot be.
    expect(await ledger.reserve(account, `${r}-2`, 1000, 200, 200)).toEqual({ ok: false, spentNano: 850, reservedNano: 0 });
    expect(store.loads).toEqual([account, account]);
    expect(await ledger.reserve(account, `${r}-3`, 1000, 100, 500)).toEqual({ ok: true, grantedNano: 150 });
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 850, reservedNano: 150 });
  });

  test("a call in flight when Redis lost the account stays held (it is journaled), and its settle counts once", async () => {
    const account = fresh("acct");
    const store = fakeTruth();
    const ledger = new RedisBudgetLedger(await redisClient(), store, memoryLogger());
    const r = fresh("req");
    expect(await ledger.reserve(account, `${r}-1`, 1000, 100, 900)).toEqual({ ok: true, grantedNano: 900 });
    store.journalCall(account, `${r}-1`, 900, ledger.lease.id, 1000);
    const admin = redis.client();
    await admin.flushall();
    admin.disconnect();
    // Rebuilt from the store: the journal still lists r1, so only 100 is left.
    expect(await ledger.reserve(account, `${r}-2`, 1000, 100, 200)).toEqual({ ok: true, grantedNano: 100 });
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 1000 });
    store.writeRow(account, `${r}-1`, 850);
    await ledger.settle(`${r}-1`, 850);
    await ledger.settle(`${r}-1`, 850); // still idempotent
    await ledger.settle(`${r}-2`, 50);
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 900, reservedNano: 0 });
    expect(await ledger.reserve(account, `${r}-3`, 1000, 200, 200)).toMatchObject({ ok: false, spentNano: 900 });
  });

  test("a settle retried after the loss, whose row the rebuild already counted, counts once", async () => {
    const account = fresh("acct");
    const store = fakeTruth();
    const ledger = new RedisBudgetLedger(await redisClient(), store, memoryLogger());
    const r = fresh("req");
    expect(await ledger.reserve(account, `${r}-1`, 1000, 100, 600)).toEqual({ ok: true, grantedNano: 600 });
    store.writeRow(account, `${r}-1`, 500);
    const admin = redis.client();
    await admin.flushall();
    admin.disconnect();
    // Rebuilt with the row in it; then the settle (retried after the outage, say) arrives.
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 500, reservedNano: 0 });
    await ledger.settle(`${r}-1`, 500);
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 500, reservedNano: 0 });
  });

  test("a hold rebuilt from the journal whose call ended before its owner could settle it is settled once, at its row", async () => {
    const account = fresh("acct");
    const store = fakeTruth();
    const owner = new RedisBudgetLedger(await redisClient(), store, memoryLogger());
    const other = new RedisBudgetLedger(await redisClient(), store, memoryLogger());
    const r = fresh("req");
    expect(await owner.reserve(account, r, 1000, 100, 600)).toEqual({ ok: true, grantedNano: 600 });
    store.journalCall(account, r, 600, owner.lease.id, 1000);
    // Its settle lands in Redis, then Redis loses it before the row is written.
    await owner.settle(r, 400);
    const admin = redis.client();
    await admin.flushall();
    admin.disconnect();
    expect(await other.snapshot(account)).toEqual({ spentNano: 0, reservedNano: 600 });
    store.writeRow(account, r, 400);
    // Its owner settled already: the reconciler finds the hold listed, its journal entry ended, and settles it at the row.
    expect(await other.orphans()).toContain(r);
    await other.settle(r, 400);
    await owner.settle(r, 400);
    expect(await other.orphans()).not.toContain(r);
    expect(await other.snapshot(account)).toEqual({ spentNano: 400, reservedNano: 0 });
  });

  test("snapshot after data loss reloads from the store too", async () => {
    const account = fresh("acct");
    const store = fakeTruth({ spent: new Map([[account, 400]]) });
    const ledger = new RedisBudgetLedger(await redisClient(), store, memoryLogger());
    await ledger.reserve(account, fresh("req"), 1000, 10, 10);
    const admin = redis.client();
    await admin.flushall();
    admin.disconnect();
    expect(await ledger.snapshot(account)).toEqual({ spentNano: 400, reservedNano: 0 });
  });

  test("with Redis down, reserve and snapshot throw ApiError `unavailable`; it recovers without a new client", async () => {
    const account = fresh("acct");
    const client = await redisClient();
    const ledger = new RedisBudgetLedger(client, fakeTruth(), memoryLogger());
    expect((await ledger.reserve(account, fresh("req"), 1000, 10, 10)).ok).toBe(true);

    await redis.stop();
    try {
      const refused = await ledger.reserve(account, fresh("req"), 1000, 10, 10).then(
        () => null,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(ApiError);
      expect(refused).toMatchObject({ code: "unavailable", status: 503 });
      await expect(ledger.snapshot(account)).rejects.toMatchObject({ code: "unavailable" });
      // A settle during the outage does not throw (it is retried in the background).
      await ledger.settle(fresh("req"), 5);
    } finally {
      await redis.start();
    }

    // Redis is back (empty): the same client reconnects by itself; bounded polling.
    let outcome = null;
    for (let attempt = 0; attempt < 200 && outcome === null; attempt++) {
      outcome = await ledger.reserve(account, fresh("req"), 1000, 10, 10).catch((err: unknown) => {
        if (!(err instanceof ApiError) || err.code !== "unavailable") throw err;
        return null;
      });
      if (outcome === null) await Bun.sleep(50);
    }
    expect(outcome).toEqual({ ok: true, grantedNano: 10 });
  });
});
