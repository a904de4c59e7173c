import { describe, expect, test } from "bun:test";
import { ReadCache } from "../../src/store/cached-store";
import type { ChangeFeed } from "../../src/store/change-feed";
import { fixedRandom } from "../helpers/fixed-random";

/**
 * A cache on a feed the test drives (`changed` says what changed; `feed.live` is settable),
 * with loads the test finishes when it chooses (`finishFirst`, `finishLast`).
 */
function cacheUnderTest(maxEntries?: number) {
  let listener: (key: string | null) => void = () => {};
  const feed: ChangeFeed & { live: boolean } = {
    live: true,
    subscribe: (l: (key: string | null) => void) => void (listener = l),
    close: async () => {},
  };
  const waiting: Array<(value: string) => void> = [];
  const loads = {
    load: () => new Promise<string>((resolve) => waiting.push(resolve)),
    finishFirst: (value: string) => waiting.shift()!(value),
    finishLast: (value: string) => waiting.pop()!(value),
  };
  return { cache: new ReadCache(feed, maxEntries), feed, changed: (key: string | null) => listener(key), loads };
}

const answered = (value: string) => async () => value;

describe("ReadCache", () => {
  test("a second read of a key is served from memory", async () => {
    const { cache } = cacheUnderTest();
    let loads = 0;
    const load = async () => `v${++loads}`;
    expect(await cache.read("connections a u1", load)).toBe("v1");
    expect(await cache.read("connections a u1", load)).toBe("v1");
    expect(loads).toBe(1);
  });

  test("a lookup under way when its key changes does not store its answer", async () => {
    const { cache, changed, loads } = cacheUnderTest();
    const first = cache.read("connections a u1", loads.load);
    changed("connections a u1");
    loads.finishFirst("before the change");
    expect(await first).toBe("before the change");
    expect(await cache.read("connections a u1", answered("after the change"))).toBe("after the change");
  });

  test("a lookup under way when another key changes stores its answer", async () => {
    const { cache, changed, loads } = cacheUnderTest();
    const first = cache.read("connections a u1", loads.load);
    // Other users connecting meanwhile, as in a wave of connects: their keys, not this one.
    for (let i = 2; i <= 50; i++) changed(`connections a u${i}`);
    changed("apps a");
    loads.finishFirst("u1's connection");
    await first;
    expect(await cache.read("connections a u1", answered("read again"))).toBe("u1's connection");
    expect(cache.size).toBe(1);
  });

  test("an app's change also stops a lookup of its keys under way", async () => {
    const { cache, changed, loads } = cacheUnderTest();
    const keys = cache.read("apps a keys", loads.load);
    changed("apps a");
    loads.finishFirst("keys before the revoke");
    await keys;
    expect(await cache.read("apps a keys", answered("keys after the revoke"))).toBe("keys after the revoke");
  });

  test("a clear stops every lookup under way from storing", async () => {
    const { cache, changed, loads } = cacheUnderTest();
    const one = cache.read("connections a u1", loads.load);
    const other = cache.read("apps b", loads.load);
    changed(null);
    loads.finishFirst("u1 before");
    loads.finishFirst("b before");
    await Promise.all([one, other]);
    expect(cache.size).toBe(0);
  });

  test("of two lookups of one key, the one that started after the change stores its answer", async () => {
    const { cache, changed, loads } = cacheUnderTest();
    const early = cache.read("connections a u1", loads.load);
    changed("connections a u1");
    const late = cache.read("connections a u1", loads.load);
    // The late one finishes first and stores; the early one, finishing last, must not replace it.
    loads.finishLast("late, fresh");
    await late;
    loads.finishFirst("early, stale");
    await early;
    expect(await cache.read("connections a u1", answered("read again"))).toBe("late, fresh");
  });

  test("two lookups of one key under way when it changes: neither stores its answer", async () => {
    const { cache, changed, loads } = cacheUnderTest();
    const one = cache.read("connections a u1", loads.load);
    const two = cache.read("connections a u1", loads.load);
    changed("connections a u1");
    loads.finishFirst("stale one");
    await one;
    loads.finishFirst("stale two");
    await two;
    expect(cache.size).toBe(0);
  });

  test("a change after one of two lookups of a key finished still stops the other", async () => {
    const { cache, changed, loads } = cacheUnderTest();
    const one = cache.read("connections a u1", loads.load);
    const two = cache.read("connections a u1", loads.load);
    loads.finishFirst("before the change");
    await one;
    changed("connections a u1");
    loads.finishFirst("read before the change, finished after it");
    await two;
    expect(await cache.read("connections a u1", answered("after the change"))).toBe("after the change");
  });

  test("a lookup that fails stores nothing and leaves the next one free to store", async () => {
    const { cache } = cacheUnderTest();
    await expect(
      cache.read("connections a u1", async () => {
        throw new Error("database away");
      }),
    ).rejects.toThrow("database away");
    expect(await cache.read("connections a u1", answered("back"))).toBe("back");
    expect(await cache.read("connections a u1", answered("read again"))).toBe("back");
  });

  test("while the feed is not live every read goes to the store and nothing is kept", async () => {
    const { cache, feed } = cacheUnderTest();
    feed.live = false;
    let loads = 0;
    const load = async () => `v${++loads}`;
    await cache.read("connections a u1", load);
    await cache.read("connections a u1", load);
    expect(loads).toBe(2);
    expect(cache.size).toBe(0);
  });

  test("past its bound the oldest entry goes, and only it", async () => {
    const { cache } = cacheUnderTest(3);
    const loads: string[] = [];
    const read = (key: string) =>
      cache.read(key, async () => {
        loads.push(key);
        return key;
      });
    for (const key of ["apps a", "connections a u1", "connections a u2", "connections a u3"]) await read(key);
    expect(cache.size).toBe(3);
    loads.length = 0;
    for (const key of ["connections a u1", "connections a u2", "connections a u3"]) await read(key);
    expect(loads).toEqual([]);
    await read("apps a");
    expect(loads).toEqual(["apps a"]);
    // Read again, the app's entry is the newest: u1 went to make room for it.
    loads.length = 0;
    for (const key of ["connections a u2", "connections a u3", "apps a", "connections a u1"]) await read(key);
    expect(loads).toEqual(["connections a u1"]);
    expect(cache.size).toBe(3);
  });

  test("a seeded walk of reads, changes and clears keeps what a first-in, first-out model of the bound keeps", async () => {
    const bound = 64;
    const { cache, changed } = cacheUnderTest(bound);
    // The model: the keys held, oldest first.
    let model: string[] = [];
    const pick = fixedRandom(35);
    for (let step = 0; step < 20_000; step++) {
      const key = `connections a u${pick(200)}`;
      const roll = pick(100);
      if (roll < 80) {
        let loaded = false;
        await cache.read(key, async () => {
          loaded = true;
          return key;
        });
        expect(loaded).toBe(!model.includes(key));
        if (loaded) {
          if (model.length >= bound) model.shift();
          model.push(key);
        }
      } else if (roll < 99) {
        changed(key);
        model = model.filter((k) => k !== key);
      } else {
        changed(null);
        model = [];
      }
      expect(cache.size).toBe(model.length);
    }
  });
});
