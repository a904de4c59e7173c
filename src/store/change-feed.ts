import type { Database } from "bun:sqlite";
import type { SQL } from "bun";
import type { Logger } from "../logger";

/**
 * Tells this process that rows it may have cached changed elsewhere (another instance, the
 * CLI). `live` is false while changes could be missed: the cache is bypassed then.
 */
export interface ChangeFeed {
  readonly live: boolean;
  /** Called before every cached read: a feed that can look for changes cheaply does so here. */
  poll?(): void;
  /** `key` names the cached entries: `apps <appId>` or `connections <appId> <appUserId>`; null: anything may have changed. */
  subscribe(listener: (key: string | null) => void): void;
  close(): Promise<void>;
}

/**
 * SQLite: `PRAGMA data_version` changes when another connection commits to the file (the
 * CLI, or another process with REDIS_URL). Reading it takes the file's shared lock (a few
 * system calls), which under load was 8 % of the service's CPU when done before every
 * cached lookup (ARCHITECTURE.md §7 "Per-call strings and writes"), so it is read at most
 * once per millisecond: an outside change is seen by requests that start a millisecond
 * after it commits. This
 * process's own writes go through the cache, which drops what they touch.
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

const CHANNEL = "proxy_changes";
const HEARTBEAT_MS = 300;
/** Without our own heartbeat back for this long, the listening connection is presumed lost. */
const SILENCE_MS = 900;

/**
 * PostgreSQL: triggers on apps, app_keys and connections NOTIFY `proxy_changes` with the
 * row's key (migration 2). The LISTEN connection is Bun's own, which reconnects by itself;
 * since notifications sent while it was away are lost, every (re)subscription drops the
 * whole cache. A heartbeat this process NOTIFYs to itself proves the connection is alive:
 * when it stops arriving, the feed is not live and reads go to the database, so a revoked
 * key or connection is never served from a cache for more than about a second.
 */
export async function postgresChangeFeed(sql: SQL, logger: Logger): Promise<ChangeFeed> {
  const listeners: Array<(key: string | null) => void> = [];
  const token = `heartbeat ${crypto.randomUUID()}`;
  let lastBeat = 0;
  const emit = (key: string | null) => {
    for (const listener of listeners) listener(key);
  };
  const subscription = await sql.listen(
    CHANNEL,
    (payload) => {
      if (payload === token) lastBeat = Date.now();
      else if (!payload.startsWith("heartbeat ")) emit(payload);
    },
    () => {
      lastBeat = Date.now();
      emit(null);
    },
  );
  let wasLive = true;
  const timer = setInterval(() => {
    void sql`SELECT pg_notify(${CHANNEL}, ${token})`.catch(() => {});
    const live = Date.now() - lastBeat <= SILENCE_MS;
    if (live !== wasLive) {
      wasLive = live;
      if (live) emit(null);
      logger[live ? "info" : "warn"](live ? "change feed is back: caches in use again" : "change feed is silent: reading from the database until it is back");
    }
  }, HEARTBEAT_MS);
  timer.unref?.();
  return {
    get live() {
      return Date.now() - lastBeat <= SILENCE_MS;
    },
    subscribe: (listener) => void listeners.push(listener),
    close: async () => {
      clearInterval(timer);
      await subscription.unlisten().catch(() => {});
    },
  };
}
