/**
 * Migration 8 of the PostgreSQL store: rate_limit_take_many (migration 7) decides a batch's
 * checks of one key without writing per check. Migration 7 ran rate_limit_take once per
 * check: a count update, a delete of what expired and a min() per call, which made the
 * checks the largest part of PostgreSQL's time per chat call (pg_stat_statements,
 * ARCHITECTURE.md §7 "Checks decided per key").
 *
 * Now each key of the batch is locked once, and its checks are decided in order against a
 * count and an oldest hit kept in the function: the hits admitted in the batch are
 * inserted together, the count written once. Expired hits are deleted only when the oldest
 * one has left the window. Each check is answered as rate_limit_take (migration 4) answers
 * it, one call at a time, in the same order.
 */
export const RATE_LIMITS_BATCH_SQL = `
      CREATE OR REPLACE FUNCTION rate_limit_take_many(p_items jsonb)
        RETURNS TABLE (item int, allowed boolean, remaining int, reset_ms bigint) LANGUAGE plpgsql AS $$
      DECLARE
        x record;
        held text := NULL;
        -- For the key held: the hits in its window (stored, and admitted by this batch).
        cnt int;
        oldest bigint;
        -- Admitted by this batch, not stored yet.
        fresh bigint[];
        expired int;
      BEGIN
        -- Windows are not worth a wait for the disk.
        PERFORM set_config('synchronous_commit', 'off', true);
        FOR x IN
          SELECT (e.ordinality - 1)::int AS pos, e.value->>'key' AS k, (e.value->>'limit')::int AS lim,
                 (e.value->>'window')::bigint AS win, (e.value->>'now')::bigint AS at
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e
          ORDER BY 2, e.ordinality
        LOOP
          IF held IS DISTINCT FROM x.k THEN
            IF held IS NOT NULL THEN
              INSERT INTO rate_limit_hits (key, at_ms) SELECT held, unnest(fresh);
              UPDATE rate_limit_keys r SET n = cnt WHERE r.key = held;
            END IF;
            held := x.k;
            fresh := '{}';
            SELECT r.n INTO cnt FROM rate_limit_keys r WHERE r.key = x.k FOR UPDATE;
            IF NOT FOUND THEN
              INSERT INTO rate_limit_keys (key, n) VALUES (x.k, 0) ON CONFLICT DO NOTHING;
              SELECT r.n INTO cnt FROM rate_limit_keys r WHERE r.key = x.k FOR UPDATE;
            END IF;
            SELECT min(h.at_ms) INTO oldest FROM rate_limit_hits h WHERE h.key = x.k;
          END IF;
          -- What left the window by this check's time: stored hits, then the batch's own.
          IF oldest IS NOT NULL AND oldest <= x.at - x.win THEN
            WITH gone AS (DELETE FROM rate_limit_hits h WHERE h.key = x.k AND h.at_ms <= x.at - x.win RETURNING 1)
            SELECT count(*) INTO expired FROM gone;
            cnt := cnt - expired;
            SELECT count(*) INTO expired FROM unnest(fresh) AS f(at_ms) WHERE f.at_ms <= x.at - x.win;
            IF expired > 0 THEN
              fresh := ARRAY(SELECT f.at_ms FROM unnest(fresh) AS f(at_ms) WHERE f.at_ms > x.at - x.win);
              cnt := cnt - expired;
            END IF;
            SELECT min(h.at_ms) INTO oldest FROM rate_limit_hits h WHERE h.key = x.k;
            oldest := LEAST(oldest, (SELECT min(f.at_ms) FROM unnest(fresh) AS f(at_ms)));
          END IF;
          item := x.pos;
          IF cnt >= x.lim THEN
            allowed := false; remaining := 0; reset_ms := GREATEST(1, oldest + x.win - x.at);
          ELSE
            allowed := true; remaining := x.lim - cnt - 1; reset_ms := COALESCE(oldest, x.at) + x.win - x.at;
            fresh := fresh || x.at;
            cnt := cnt + 1;
            oldest := COALESCE(oldest, x.at);
          END IF;
          RETURN NEXT;
        END LOOP;
        IF held IS NOT NULL THEN
          INSERT INTO rate_limit_hits (key, at_ms) SELECT held, unnest(fresh);
          UPDATE rate_limit_keys r SET n = cnt WHERE r.key = held;
        END IF;
      END $$;
`;
