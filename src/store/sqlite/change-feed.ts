import type { Database } from "bun:sqlite";
import type { ChangeFeed } from "../change-feed";

/**
 * SQLite: `PRAGMA data_version` changes when another connection commits to the file (the
 * CLI, or another process with REDIS_URL). Reading it takes the file's shared lock (a few
 * system calls), which under load was 8 % of the service's CPU when done before every
 * cached lookup (ARCHITECTURE.md §7 "Per-call strings and writes"), so it is read at most
 * once per millisecond: an outside change is seen by requests that start a millisecond
 * after it commits. This process's own writes go through the cache, which drops what they
 * touch.
 */
export function sqliteChangeFeed(db: Database): ChangeFeed {
  const listeners: Array<(key: string | null) => void> = [];
  const version = db.query<{ data_version: number }, []>("PRAGMA data_version");
  let seen = version.get()!.data_version;
  let checkedAt = performance.now();
  return {
    live: true,
    poll() {
      const at = performance.now();
      if (at - checkedAt < 1) return;
      checkedAt = at;
      const now = version.get()!.data_version;
      if (now === seen) return;
      seen = now;
      for (const listener of listeners) listener(null);
    },
    subscribe: (listener) => void listeners.push(listener),
    close: async () => {},
  };
}
