/**
 * The sweep of idle rate-limit keys (rate_limit_sweep, PostgreSQL migrations 4 and 16) over
 * many live keys: how long it takes, and which keys it holds locked until it ends.
 *
 *   ./node_modules/.bin/bun scripts/bench/rate-limit-sweep-postgres.ts [--keys 10000]
 *     [--hits 20] [--idle 0] [--rounds 3]
 *
 * A durable PostgreSQL (fsync on) with the store's migrations; --keys live keys, each with
 * --hits hits spread over the last 50 s of a 60 s window, and --idle keys whose hits have
 * all left it. Each round sweeps in a transaction of its own, kept open after the sweep;
 * meanwhile another session asks for a live key's lock and an idle key's without waiting
 * (NOWAIT), and the transaction commits (an idle key forgotten in one round is written
 * back before the next). Prints one JSON line per round: the sweep's milliseconds, keys
 * forgotten, and whether each key was held. Unpinned; bounded by --rounds.
 */
import { flagReader } from "./lib/flags";
import { startBenchPostgres } from "./lib/postgres";
import { openPostgresStore } from "../../src/store/postgres";

const flag = flagReader();
const KEYS = Number(flag("keys", "10000"));
const HITS = Number(flag("hits", "20"));
const IDLE = Number(flag("idle", "0"));
const ROUNDS = Number(flag("rounds", "3"));
const WINDOW_MS = 60_000;
const NOW = 10_000_000_000;

const postgres = await startBenchPostgres(null);
const store = await openPostgresStore(await postgres.createDatabase("bench_sweep"), { poolSize: 4 });
const sql = store.database.sql;
try {
  await sql`INSERT INTO rate_limit_keys (key, n) SELECT 'chat:live-' || g, ${HITS} FROM generate_series(1, ${KEYS}) AS g`;
  await sql`INSERT INTO rate_limit_hits (key, at_ms)
            SELECT 'chat:live-' || g, ${NOW} - h * (50000 / ${HITS}) FROM generate_series(1, ${KEYS}) AS g, generate_series(1, ${HITS}) AS h`;
  const writeIdle = async () => {
    if (IDLE === 0) return;
    await sql`INSERT INTO rate_limit_keys (key, n) SELECT 'chat:idle-' || g, 1 FROM generate_series(1, ${IDLE}) AS g ON CONFLICT DO NOTHING`;
    await sql`INSERT INTO rate_limit_hits (key, at_ms) SELECT 'chat:idle-' || g, ${NOW - WINDOW_MS - 1} FROM generate_series(1, ${IDLE}) AS g`;
  };
  await writeIdle();
  await sql`ANALYZE rate_limit_keys`;
  await sql`ANALYZE rate_limit_hits`;
  const heldBy = async (key: string): Promise<boolean> => {
    const other = await sql.reserve();
    try {
      await other`SELECT 1 FROM rate_limit_keys WHERE key = ${key} FOR UPDATE NOWAIT`;
      return false;
    } catch {
      return true;
    } finally {
      other.release();
    }
  };
  for (let round = 1; round <= ROUNDS; round++) {
    const sweeper = await sql.reserve();
    try {
      await sweeper`BEGIN`;
      const started = performance.now();
      const [swept] = await sweeper`SELECT rate_limit_sweep('chat:', ${NOW - WINDOW_MS}) AS forgotten`;
      const ms = performance.now() - started;
      const liveHeld = await heldBy(`chat:live-${Math.ceil(KEYS / 2)}`);
      const idleHeld = IDLE > 0 ? await heldBy("chat:idle-1") : null;
      await sweeper`COMMIT`;
      console.log(
        JSON.stringify({ round, liveKeys: KEYS, idleKeys: IDLE, sweepMs: Math.round(ms * 10) / 10, forgotten: Number(swept.forgotten), liveHeld, idleHeld }),
      );
    } finally {
      sweeper.release();
    }
    await writeIdle();
  }
} finally {
  await store.close();
  await postgres.stop();
}
