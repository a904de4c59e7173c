import { describe, expect, test } from "bun:test";
import { ReadCache } from "../../src/store/cached-store";
import type { ChangeFeed } from "../../src/store/change-feed";

/**
 * A cache on a feed the test drives (`changed` says what changed; `feed.live` is settable),
 * with loads the test finishes when it chooses (`finishFirst`, `finishLast`).
 */
function cacheUnderTest() {
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
  return { cache: new ReadCache(feed), feed, changed: (key: string | null) => listener(key), loads };
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
});
