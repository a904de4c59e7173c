/**
 * The PostgreSQL sliding window (src/store/postgres/rate-limiter.ts) on a real server:
 * exact under concurrency from several pools (instances), the window slides like the
 * in-process one, and forgetting idle keys never loses a hit of a live window.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { PostgresRateLimiter } from "../../src/store/postgres/rate-limiter";
import { InMemoryRateLimiter } from "../../src/ratelimit/rate-limiter";
import { openPostgresStore, type PostgresStore } from "../../src/store/postgres";
import { startPostgres, type TestPostgres } from "../helpers/postgres";
import { fixedRandom } from "../helpers/fixed-random";

let pg: TestPostgres;
const stores: PostgresStore[] = [];
let now = 1_000_000;
const clock = () => now;

beforeAll(async () => {
  pg = await startPostgres();
  const url = await pg.createDatabase();
  for (let i = 0; i < 3; i++) stores.push(await openPostgresStore(url, { poolSize: 8 }));
});
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await pg?.destroy();
});

const rule = { name: "chat", limit: 30, windowMs: 60_000 };

test("31 simultaneous checks from three instances: exactly 30 allowed", async () => {
  const limiters = stores.map((s) => new PostgresRateLimiter(s.database, clock));
  const decisions = await Promise.all(Array.from({ length: 31 }, (_, i) => limiters[i % 3]!.check(rule, "app/u1")));
  expect(decisions.filter((d) => d.allowed)).toHaveLength(30);
  const refused = decisions.find((d) => !d.allowed)!;
  expect(refused).toMatchObject({ remaining: 0, limit: 30 });
  expect(refused.resetMs).toBeGreaterThan(0);
});

test("checks that arrive together share a transaction and stay exact: 100 at once on a limit of 40", async () => {
  const store = stores[2]!;
  let trips = 0;
  const counted = {
    run: ((work) => {
      trips++;
      return store.database.run(work);
    }) as typeof store.database.run,
  } as typeof store.database;
  const limiter = new PostgresRateLimiter(counted, clock);
  const wide = { name: "batch", limit: 40, windowMs: 60_000 };
  const decisions = await Promise.all(Array.from({ length: 100 }, () => limiter.check(wide, "app/u2")));
  expect(decisions.filter((d) => d.allowed)).toHaveLength(40);
  // The checks went in a few transactions, not 100 (the background sweep is one more).
  expect(trips).toBeLessThan(10);
  // In order: the first 40 allowed, counting down.
  expect(decisions.slice(0, 40).map((d) => d.remaining)).toEqual(Array.from({ length: 40 }, (_, i) => 39 - i));
});

test("decides like the in-process limiter as the window slides", async () => {
  const db = new PostgresRateLimiter(stores[0]!.database, clock);
  const memory = new InMemoryRateLimiter(clock);
  const small = { name: "slide", limit: 3, windowMs: 1_000 };
  for (const step of [0, 100, 200, 300, 999, 1_000, 1_100, 1_150, 2_500, 2_500, 2_500, 2_500]) {
    now = 2_000_000 + step;
    expect(await db.check(small, "k")).toEqual(await memory.check(small, "k"));
  }
});

test("batches of checks at different times decide as the in-process limiter does, one check at a time in the same order", async () => {
  const db = new PostgresRateLimiter(stores[0]!.database, clock);
  const memory = new InMemoryRateLimiter(clock);
  const small = { name: "batches", limit: 5, windowMs: 1_000 };
  /** Sends checks at the given times together (the first goes alone, the rest as one batch), then asks the in-process limiter the same. */
  const compare = async (key: string, rule: typeof small, times: number[]) => {
    const sent = times.map((at) => {
      now = at;
      return db.check(rule, key);
    });
    const fromDb = await Promise.all(sent);
    const expected = [];
    for (const at of times) {
      now = at;
      expected.push(await memory.check(rule, key));
    }
    expect(fromDb).toEqual(expected);
  };
  // Hits admitted early in a batch leave the window before its last check: at 9,001,015
  // the hits of 9,000,000 (stored) and 9,000,010 (this batch's) have both expired...
  const two = { name: "expiring", limit: 2, windowMs: 1_000 };
  await compare("both-gone", two, [9_000_000, 9_000_010, 9_000_020, 9_001_015, 9_001_016, 9_001_017]);
  // ... and at 9,011,001 only the stored one has: the oldest hit is then the batch's own.
  await compare("one-gone", two, [9_010_000, 9_010_500, 9_011_001, 9_011_002]);
  // A fixed pseudo-random walk: groups of 1-16 checks sent together, the clock moving
  // 0-200 ms between the checks of a group (so hits admitted early in a batch leave the
  // window before its last checks) and up to 900 ms between groups.
  const random = fixedRandom(7);
  now = 10_000_000;
  for (let group = 0; group < 80; group++) {
    const times: number[] = [];
    for (let i = 0, size = 1 + random(16); i < size; i++) times.push((now += random(201)));
    await compare("walk", small, times);
    now += random(900);
  }
});

test("batches that mix several keys decide each key as the in-process limiter does", async () => {
  // Each key's hits are written when the batch moves on to the next key, and a key's expired
  // hits go with the check that finds them: with three keys in every batch and a window a few
  // batches long, both happen with and without unstored hits of the batch itself.
  const db = new PostgresRateLimiter(stores[0]!.database, clock);
  const memory = new InMemoryRateLimiter(clock);
  const small = { name: "mixed", limit: 4, windowMs: 700 };
  const random = fixedRandom(11);
  now = 20_000_000;
  for (let group = 0; group < 60; group++) {
    const checks: Array<{ key: string; at: number }> = [];
    for (let i = 0, size = 1 + random(12); i < size; i++) checks.push({ key: `k${random(3)}`, at: (now += random(120)) });
    const sent = checks.map(({ key, at }) => {
      now = at;
      return db.check(small, key);
    });
    const fromDb = await Promise.all(sent);
    const expected = [];
    for (const { key, at } of checks) {
      now = at;
      expected.push(await memory.check(small, key));
    }
    expect(fromDb).toEqual(expected);
    now += random(500);
  }
});

test("forgetting idle keys keeps live ones exact", async () => {
  const limiter = new PostgresRateLimiter(stores[1]!.database, clock);
  const small = { name: "sweep", limit: 2, windowMs: 1_000 };
  now = 3_000_000;
  await limiter.check(small, "idle");
  await limiter.check(small, "live");
  now += 1_500; // "idle" has nothing left in its window; "live" gets a fresh hit
  await limiter.check(small, "live");
  // The limiter sweeps in the background once a window; sweep again to be sure it has run.
  await stores[1]!.database.run((sql) => sql`SELECT rate_limit_sweep('sweep:', ${now - small.windowMs})`);
  const keys = await stores[1]!.database.run((sql) => sql`SELECT key, n FROM rate_limit_keys WHERE starts_with(key, 'sweep:') ORDER BY key`);
  expect(keys).toEqual([{ key: "sweep:live", n: 1 }]);
  expect((await limiter.check(small, "live")).allowed).toBe(true);
  expect((await limiter.check(small, "live")).allowed).toBe(false);
  expect((await limiter.check(small, "idle")).remaining).toBe(1);
});

test("a sweep under way never holds a live key: checks of live keys go on while it runs", async () => {
  // The sweep runs in a transaction of its own, and a lock it takes is held until that ends:
  // here the transaction is kept open after the sweep, and another session asks for each
  // key's lock without waiting (NOWAIT fails at once on a held lock).
  // Written as checks leave them (a limiter here would sweep on its own in the background).
  const sql = stores[1]!.database.sql;
  await sql`INSERT INTO rate_limit_keys (key, n) VALUES ('held:quiet', 1), ('held:busy', 1)`;
  await sql`INSERT INTO rate_limit_hits (key, at_ms) VALUES ('held:quiet', 4000000), ('held:busy', 4001500)`;
  const windowMs = 1_000;
  now = 4_001_500;
  const sweeper = await sql.reserve();
  try {
    await sweeper`BEGIN`;
    const [swept] = await sweeper`SELECT rate_limit_sweep('held:', ${now - windowMs}) AS forgotten`;
    expect(swept.forgotten).toBe(1);
    const other = await sql.reserve();
    try {
      const [busy] = await other`SELECT key FROM rate_limit_keys WHERE key = 'held:busy' FOR UPDATE NOWAIT`;
      expect(busy).toEqual({ key: "held:busy" });
      // The key being forgotten is held until the sweep commits.
      await expect(other`SELECT key FROM rate_limit_keys WHERE key = 'held:quiet' FOR UPDATE NOWAIT`.then(() => "free")).rejects.toThrow();
    } finally {
      other.release();
    }
    await sweeper`COMMIT`;
  } finally {
    sweeper.release();
  }
  const keys = await sql`SELECT key, n FROM rate_limit_keys WHERE starts_with(key, 'held:') ORDER BY key`;
  expect(keys).toEqual([{ key: "held:busy", n: 1 }]);
});
