import type { Store } from ".";
import type { App, AppKey, AppRepository } from "./apps";
import type { Connection, ConnectionRepository } from "./connections";
import type { ChangeFeed } from "./change-feed";

/** Past this many entries the cache starts over: lookups of unknown ids cannot grow it without end. */
const MAX_ENTRIES = 50_000;

/**
 * The hot-path reads (an app, its active keys, a user's connection) served from memory, so
 * that a request costs the database no round trip for them. An entry is dropped when the
 * feed says its rows changed, and when this process writes them. A lookup that started
 * before an invalidation does not store its (possibly stale) answer: the generation moved.
 */
export class ReadCache {
  private readonly entries = new Map<string, unknown>();
  private generation = 0;

  constructor(private readonly feed: ChangeFeed) {
    feed.subscribe((key) => (key === null ? this.clear() : this.drop(key)));
  }

  async read<T>(key: string, load: () => Promise<T>): Promise<T> {
    this.feed.poll?.();
    if (!this.feed.live) return load();
    if (this.entries.has(key)) return this.entries.get(key) as T;
    const generation = this.generation;
    const value = await load();
    if (generation === this.generation && this.feed.live) {
      if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
      this.entries.set(key, value);
    }
    return value;
  }

  /** Drops every entry under `key` (`apps X` covers the app and its keys). */
  drop(key: string): void {
    this.generation++;
    for (const k of [key, `${key} keys`]) this.entries.delete(k);
  }

  clear(): void {
    this.generation++;
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
