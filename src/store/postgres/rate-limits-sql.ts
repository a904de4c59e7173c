/**
 * Migration 4 of the PostgreSQL store: the sliding-window log of admitted requests per key
 * (the algorithm of src/ratelimit/rate-limiter.ts), shared by every instance, for
 * src/store/postgres/rate-limiter.ts. Shipped SQL is never edited: a change is a new migration.
 *
 * Both tables are unlogged: losing them in a database crash only reopens the windows.
 * `rate_limit_keys` holds each key's count, so a check costs an index lookup whatever the
 * window holds (a count(*) over the log grew with the traffic: ARCHITECTURE.md §7
 * "Rate-limit count row"),
 * and its row lock serializes the checks of one key across instances.
 */
export const RATE_LIMITS_SQL = `
      CREATE UNLOGGED TABLE rate_limit_hits (key text NOT NULL, at_ms bigint NOT NULL);
      CREATE INDEX rate_limit_hits_by_key ON rate_limit_hits(key, at_ms);
      CREATE UNLOGGED TABLE rate_limit_keys (key text PRIMARY KEY, n integer NOT NULL);

      CREATE FUNCTION rate_limit_take(p_key text, p_limit int, p_window bigint, p_now bigint,
                                      OUT allowed boolean, OUT remaining int, OUT reset_ms bigint) LANGUAGE plpgsql AS $$
      DECLARE
        cnt int;
        expired int;
        oldest bigint;
      BEGIN
        -- Windows are not worth a wait for the disk.
        PERFORM set_config('synchronous_commit', 'off', true);
        SELECT k.n INTO cnt FROM rate_limit_keys k WHERE k.key = p_key FOR UPDATE;
        IF NOT FOUND THEN
          INSERT INTO rate_limit_keys (key, n) VALUES (p_key, 0) ON CONFLICT DO NOTHING;
          SELECT k.n INTO cnt FROM rate_limit_keys k WHERE k.key = p_key FOR UPDATE;
        END IF;
        WITH gone AS (DELETE FROM rate_limit_hits WHERE key = p_key AND at_ms <= p_now - p_window RETURNING 1)
        SELECT count(*) INTO expired FROM gone;
        cnt := cnt - expired;
        SELECT min(at_ms) INTO oldest FROM rate_limit_hits WHERE key = p_key;
        IF cnt >= p_limit THEN
          allowed := false; remaining := 0; reset_ms := GREATEST(1, oldest + p_window - p_now);
          UPDATE rate_limit_keys k SET n = cnt WHERE k.key = p_key;
          RETURN;
        END IF;
        INSERT INTO rate_limit_hits (key, at_ms) VALUES (p_key, p_now);
        UPDATE rate_limit_keys k SET n = cnt + 1 WHERE k.key = p_key;
        allowed := true; remaining := p_limit - cnt - 1; reset_ms := COALESCE(oldest, p_now) + p_window - p_now;
      END $$;

      -- Forgets keys with nothing left in their window. Each key is locked before it is
      -- looked at (and skipped when a check holds it), and the look is a new snapshot
      -- taken under that lock, so a hit committed meanwhile is never deleted with its key.
      CREATE FUNCTION rate_limit_sweep(p_prefix text, p_cutoff bigint) RETURNS int LANGUAGE plpgsql AS $$
      DECLARE
        k text;
        forgotten int := 0;
      BEGIN
        PERFORM set_config('synchronous_commit', 'off', true);
        FOR k IN SELECT key FROM rate_limit_keys WHERE starts_with(key, p_prefix) FOR UPDATE SKIP LOCKED LOOP
          IF NOT EXISTS (SELECT 1 FROM rate_limit_hits WHERE key = k AND at_ms > p_cutoff) THEN
            DELETE FROM rate_limit_hits WHERE key = k;
            DELETE FROM rate_limit_keys WHERE key = k;
            forgotten := forgotten + 1;
          END IF;
        END LOOP;
        RETURN forgotten;
      END $$;
`;
