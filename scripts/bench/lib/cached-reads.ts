import type { Store } from "../../../src/store";

/**
 * The store with the reads a chat request makes (app, active keys, connection) memoised
 * in this process: the "reads cached" arm of the ablations. Fine for a fixed bench user;
 * misses are not remembered, since the bench user connects after the server starts.
 */
export function withCachedReads(real: Store): Store {
  const memo = <A extends unknown[], R>(fn: (...a: A) => R) => {
    const cache = new Map<string, R>();
    return (...a: A): R => {
      const key = a.join("\u0000");
      const hit = cache.get(key);
      if (hit !== undefined) return hit;
      const value = fn(...a);
      if (value !== null) cache.set(key, value);
      return value;
    };
  };
  const apps = Object.create(real.apps) as Store["apps"];
  apps.find = memo(real.apps.find.bind(real.apps));
  apps.activeKeysOf = memo(real.apps.activeKeysOf.bind(real.apps));
  const connections = Object.create(real.connections) as Store["connections"];
  connections.findActive = memo(real.connections.findActive.bind(real.connections));
  return { ...real, db: real.db, apps, connections, close: real.close };
}
