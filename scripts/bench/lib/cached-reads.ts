import type { Store } from "../../../src/store";

/**
 * The store with the reads a chat request makes (app, active keys, connection) memoised
 * in this process: the "reads cached" arm of the ablations. Fine for a fixed bench user;
 * misses are not remembered, since the bench user connects after the server starts.
 */
export function withCachedReads(real: Store): Store {
  // The store is asynchronous: the answer's promise is kept, and dropped again if it
  // resolves to null (a miss) or fails.
  const memo = <A extends unknown[], R>(fn: (...a: A) => Promise<R>) => {
    const cache = new Map<string, Promise<R>>();
    return (...a: A): Promise<R> => {
      const key = a.join("\u0000");
      const hit = cache.get(key);
      if (hit !== undefined) return hit;
      const value = fn(...a);
      cache.set(key, value);
      value.then(
        (v) => v === null && cache.delete(key),
        () => cache.delete(key),
      );
      return value;
    };
  };
  const apps = Object.create(real.apps) as Store["apps"];
  apps.find = memo(real.apps.find.bind(real.apps));
  apps.activeKeysOf = memo(real.apps.activeKeysOf.bind(real.apps));
  const connections = Object.create(real.connections) as Store["connections"];
  connections.findActive = memo(real.connections.findActive.bind(real.connections));
  return {
    engine: real.engine,
    apps,
    connections,
    settings: real.settings,
    usageTotals: real.usageTotals,
    usageLedger: real.usageLedger,
    grants: real.grants,
    idempotencyKeys: real.idempotencyKeys,
    webhooks: real.webhooks,
    callJournal: real.callJournal,
    instances: real.instances,
    secrets: real.secrets,
    ping: () => real.ping(),
    close: () => real.close(),
  };
}
