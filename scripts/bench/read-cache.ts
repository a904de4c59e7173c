/**
 * The read cache (src/store/cached-store.ts ReadCache) with more users calling than it holds:
 * the share of lookups it answers, for users picked uniformly or with a skew (a few users
 * make most calls, as real traffic tends to), and the time per lookup.
 *
 *   taskset -c 1 bun scripts/bench/read-cache.ts [--root <checkout>] [--bound 50000]
 *     [--users 60000,100000] [--lookups 2000000]
 *
 * --root: the checkout whose ReadCache is measured (a `git worktree` of another commit, for
 * comparisons); this one by default. --bound: the cache's bound, when its constructor takes
 * one (one that does not uses its own). The users are picked by a seeded generator, the same
 * sequence for every checkout; the first `--users` lookups (one per user) are not counted.
 */
import { join, resolve } from "node:path";
import { flagReader } from "./lib/flags";
import { REPO_ROOT } from "./lib/proc";
import type * as CachedStore from "../../src/store/cached-store";
import type { ChangeFeed } from "../../src/store/change-feed";

const flag = flagReader();
const root = resolve(flag("root", REPO_ROOT));
const bound = Number(flag("bound", "50000"));
const userCounts = flag("users", "60000,100000").split(",").map(Number);
const lookups = Number(flag("lookups", "2000000"));
const { ReadCache } = (await import(join(root, "src/store/cached-store"))) as typeof CachedStore;

/** A feed that never reports a change: only the bound takes entries out. */
const quietFeed: ChangeFeed = { live: true, subscribe: () => {}, close: async () => {} };

/**
 * xorshift32: the same picks in every run. Not the tests' `fixedRandom`, whose products pass
 * 2^53 and lose their low bits: its draws repeat every 10,466, which here, over 2,000,000
 * lookups, would leave a few thousand users hot and the rest never called.
 */
function seeded(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

/** A user index in [0, users): uniform, or skewed so that low indexes are picked far more often. */
const pickers = {
  uniform: (random: () => number, users: number) => Math.floor(random() * users),
  // random()^3: a tenth of the users make about 46 % of the calls.
  skewed: (random: () => number, users: number) => Math.floor(random() ** 3 * users),
};

for (const users of userCounts) {
  for (const [name, pick] of Object.entries(pickers)) {
    const cache = new (ReadCache as new (feed: ChangeFeed, bound?: number) => CachedStore.ReadCache)(quietFeed, bound);
    const keys = Array.from({ length: users }, (_, i) => `connections app-1 user-${i}`);
    let loads = 0;
    const load = async () => {
      loads++;
      return null;
    };
    for (const key of keys) await cache.read(key, load);
    loads = 0;
    const random = seeded(users);
    const started = performance.now();
    for (let i = 0; i < lookups; i++) await cache.read(keys[pick(random, users)]!, load);
    const ns = ((performance.now() - started) * 1e6) / lookups;
    console.log(
      JSON.stringify({
        root,
        bound,
        users,
        picks: name,
        lookups,
        answeredFromMemory: Math.round((1 - loads / lookups) * 1000) / 1000,
        nsPerLookup: Math.round(ns),
      }),
    );
  }
}
