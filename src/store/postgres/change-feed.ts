import type { SQL } from "bun";
import type { Logger } from "../../logger";
import type { ChangeFeed } from "../change-feed";

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
