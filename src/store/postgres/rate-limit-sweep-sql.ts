/**
 * Migration 16 of the PostgreSQL store: the sweep of idle rate-limit keys (migration 4)
 * locks only the keys it is about to forget.
 *
 * Migration 4's sweep locked every key of the rule as its loop reached it, live or idle,
 * and a lock is held until the transaction ends: for the rest of the sweep, every check of
 * a key already passed waited for it, once a window. Over 10,000 live keys on an idle
 * server (scripts/bench/rate-limit-sweep-postgres.ts) that sweep took 53–56 ms and held
 * them all; this one takes 25–27 ms and holds none (ARCHITECTURE.md §7 "The sweep locks
 * only idle keys").
 *
 * Now the keys with nothing left in their window are found first, without a lock; each is
 * then locked (skipped when a check holds it) and looked at again by a statement that
 * starts under that lock, so a hit committed since the first look keeps its key. A live key
 * is never locked by the sweep; an idle key is, from the moment it is picked until the
 * sweep ends, which delays only a user coming back at that moment.
 */
export const RATE_LIMIT_SWEEP_SQL = `
      CREATE OR REPLACE FUNCTION rate_limit_sweep(p_prefix text, p_cutoff bigint) RETURNS int LANGUAGE plpgsql AS $$
      DECLARE
        k text;
        forgotten int := 0;
      BEGIN
        PERFORM set_config('synchronous_commit', 'off', true);
        FOR k IN
          SELECT r.key FROM rate_limit_keys r
          WHERE starts_with(r.key, p_prefix)
            AND NOT EXISTS (SELECT 1 FROM rate_limit_hits h WHERE h.key = r.key AND h.at_ms > p_cutoff)
        LOOP
          PERFORM 1 FROM rate_limit_keys WHERE key = k FOR UPDATE SKIP LOCKED;
          CONTINUE WHEN NOT FOUND;
          IF NOT EXISTS (SELECT 1 FROM rate_limit_hits WHERE key = k AND at_ms > p_cutoff) THEN
            DELETE FROM rate_limit_hits WHERE key = k;
            DELETE FROM rate_limit_keys WHERE key = k;
            forgotten := forgotten + 1;
          END IF;
        END LOOP;
        RETURN forgotten;
      END $$;
`;
