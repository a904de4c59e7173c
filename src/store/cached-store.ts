import type { Store } from ".";
import type { App, AppKey, AppRepository } from "./apps";
import type { Connection, ConnectionRepository } from "./connections";
import type { ChangeFeed } from "./change-feed";

/** The most entries kept, so that lookups of unknown ids cannot grow the cache without end. */
const MAX_ENTRIES = 50_000;

/**
 * The hot-path reads (an app, its active keys, a user's connection) served from memory, so
 * that a request costs the database no round trip for them. An entry is dropped when the
 * feed says its rows changed, and when this process writes them. A lookup that started
 * before its own key was invalidated (or the whole cache cleared) does not store its
 * (possibly stale) answer. Only its own key counts: each cached value is read from rows
 * whose changes name that key. With one counter for every key, users connecting (each
 * connect drops its own key, and on PostgreSQL again when its NOTIFY comes back) kept the
 * other users' lookups under way meanwhile out of the cache, to be read again from the
 * database by their next call (ARCHITECTURE.md §7 "The read cache forgets only what changed").
 */
export class ReadCache {
  private readonly entries = new Map<string, unknown>();
  /**
   * Where the next entry to go past the bound is: a Map iterates in the order its keys were
   * set, so this is the oldest. Kept from one eviction to the next, because an iterator
   * started afresh steps over every entry deleted before it (see `store`).
   */
  private oldest: Iterator<string> | null = null;
  /** Keys with lookups under way: how many, and how often the key was dropped meanwhile. */
  private readonly loading = new Map<string, { lookups: number; drops: number }>();
  private clears = 0;

  constructor(
    private readonly feed: ChangeFeed,
    private readonly maxEntries = MAX_ENTRIES,
  ) {
    feed.subscribe((key) => (key === null ? this.clear() : this.drop(key)));
  }

  async read<T>(key: string, load: () => Promise<T>): Promise<T> {
    this.feed.poll?.();
    if (!this.feed.live) return load();
    if (this.entries.has(key)) return this.entries.get(key) as T;
    let pending = this.loading.get(key);
    if (!pending) this.loading.set(key, (pending = { lookups: 0, drops: 0 }));
    const drops = pending.drops;
    const clears = this.clears;
    pending.lookups++;
    let value: T;
    try {
      value = await load();
    } finally {
      if (--pending.lookups === 0) this.loading.delete(key);
    }
    // Nothing awaits between here and the store, so no invalidation can come in between.
    if (pending.drops === drops && this.clears === clears && this.feed.live) this.store(key, value);
    return value;
  }

  /**
   * Past the bound the oldest entry goes, not the whole cache. Emptied whole (as it was),
   * every user's next call missed, the app's own entries too, each time more users than it
   * holds had come by. The oldest is found by an iterator kept between evictions: a fresh
   * one each time stepped over all the entries deleted before it, 7–41 µs a lookup
   * (ARCHITECTURE.md §7 "Read cache past its bound").
   */
  private store(key: string, value: unknown): void {
    if (this.entries.size >= this.maxEntries) {
      let next = this.oldest?.next();
      if (!next || next.done) {
        this.oldest = this.entries.keys();
        next = this.oldest.next();
      }
      if (!next.done) this.entries.delete(next.value);
    }
    this.entries.set(key, value);
  }

  /** Drops every entry under `key` (`apps X` covers the app and its keys). */
  drop(key: string): void {
    for (const k of [key, `${key} keys`]) {
      this.entries.delete(k);
      const pending = this.loading.get(k);
      if (pending) pending.drops++;
    }
  }

  clear(): void {
    this.clears++;
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}

const appKey = (appId: string) => `apps ${appId}`;
const connectionKey = (appId: string, appUserId: string) => `connections ${appId} ${appUserId}`;

/** The store with its hot reads cached; every other call goes straight through. */
export function withReadCache(store: Store, feed: ChangeFeed): Store & { readonly cache: ReadCache } {
  const cache = new ReadCache(feed);
  const apps: AppRepository = {
    create: (...args) => store.apps.create(...args),
    find: (id) => cache.read<App | null>(appKey(id), () => store.apps.find(id)),
    update: async (id, changes) => {
      const updated = await store.apps.update(id, changes);
      cache.drop(appKey(id));
      return updated;
    },
    setDisabled: async (id, at) => {
      const changed = await store.apps.setDisabled(id, at);
      cache.drop(appKey(id));
      return changed;
    },
    list: () => store.apps.list(),
    count: () => store.apps.count(),
    isRegisteredOrigin: (origin) => store.apps.isRegisteredOrigin(origin),
    addKey: async (appId, key, now) => {
      await store.apps.addKey(appId, key, now);
      cache.drop(appKey(appId));
    },
    revokeKey: async (appId, keyId, now) => {
      const revoked = await store.apps.revokeKey(appId, keyId, now);
      cache.drop(appKey(appId));
      return revoked;
    },
    activeKeysOf: (appId) => cache.read<AppKey[]>(`${appKey(appId)} keys`, () => store.apps.activeKeysOf(appId)),
    keysOf: (appId) => store.apps.keysOf(appId),
  };
  const after = async <T>(key: string, write: Promise<T>): Promise<T> => {
    try {
      return await write;
    } finally {
      cache.drop(key);
    }
  };
  const connections: ConnectionRepository = {
    find: (appId, appUserId) => cache.read<Connection | null>(connectionKey(appId, appUserId), () => store.connections.find(appId, appUserId)),
    findActive: async (appId, appUserId) => {
      const c = await connections.find(appId, appUserId);
      return c && c.revokedAt === null ? c : null;
    },
    approve: (appId, appUserId, cap, now, funding) => after(connectionKey(appId, appUserId), store.connections.approve(appId, appUserId, cap, now, funding)),
    listForApp: (appId, limit, afterUserId) => store.connections.listForApp(appId, limit, afterUserId),
    revoke: (appId, appUserId, now) => after(connectionKey(appId, appUserId), store.connections.revoke(appId, appUserId, now)),
    markFundingInvalid: (appId, appUserId, now) => after(connectionKey(appId, appUserId), store.connections.markFundingInvalid(appId, appUserId, now)),
    // Never cached: the opened key stays in memory only as long as the call that pays with it.
    userUpstreamKey: (appId, appUserId) => store.connections.userUpstreamKey(appId, appUserId),
    storedUserKeys: () => store.connections.storedUserKeys(),
    replaceStoredUserKey: (appId, appUserId, expected, replacement) => store.connections.replaceStoredUserKey(appId, appUserId, expected, replacement),
    forgetUserKey: (appId, appUserId, expected, now) =>
      after(connectionKey(appId, appUserId), store.connections.forgetUserKey(appId, appUserId, expected, now)),
  };
  return {
    ...store,
    engine: store.engine,
    apps,
    connections,
    cache,
    close: async () => {
      await feed.close();
      await store.close();
    },
  };
}
