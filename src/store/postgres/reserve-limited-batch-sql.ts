/**
 * Migration 9 of the PostgreSQL store: a chat call's rate-limit check goes in the same
 * statement as its budget reservation, as it does in one Redis script beside Redis
 * (src/http/rate-limit-macro.ts DeferredRateLimit). With PostgreSQL alone a call made two round
 * trips before reaching the upstream, one batch of checks and one of reserves; now it
 * makes one.
 *
 * budget_reserve_limited_many takes budget_reserve_many's items, each with an optional
 * "check" in rate_limit_take_many's shape. It decides the batch's checks first, with that
 * function, then reserves for the items whose check allowed them (or that carry none), with
 * budget_reserve_many: every decision is the one those two functions give when called one
 * after the other, and a call refused by its limit reserves nothing. Locks are taken in
 * the same order as theirs (rate-limit keys, then accounts, each in key order), and no
 * other function takes an account row before a rate-limit key, so this adds no deadlock.
 *
 * The two functions it calls stay as they are: the limiter still checks other routes (and
 * chat calls while it is falling back) with rate_limit_take_many, and instances of the
 * previous version, during a rolling upgrade, call budget_reserve_many.
 */
export const RESERVE_LIMITED_BATCH_SQL = `
      -- p_items: [{"account", "request", "cap", "min", "desired", "check"?: {"key", "limit",
      -- "window", "now"}}, ...]. One result row per item, with its position (0-based):
      -- status, a and b as budget_reserve_many's, or status 3 when its check refused it
      -- (nothing reserved); allowed, remaining and reset_ms as rate_limit_take_many's for an
      -- item with a check, null for one without.
      CREATE FUNCTION budget_reserve_limited_many(p_items jsonb, p_instance text)
        RETURNS TABLE (item int, status int, a bigint, b bigint, allowed boolean, remaining int, reset_ms bigint)
        LANGUAGE plpgsql AS $$
      DECLARE
        n int := jsonb_array_length(p_items);
        -- Per item (1-based): its check's answer, null when it has none.
        decided boolean[] := array_fill(NULL::boolean, ARRAY[n]);
        left_of int[] := array_fill(NULL::int, ARRAY[n]);
        reset_of bigint[] := array_fill(NULL::bigint, ARRAY[n]);
        checks jsonb;
        check_of int[];
        reserves jsonb;
        reserve_of int[];
        d record;
      BEGIN
        SELECT COALESCE(jsonb_agg(e.value->'check' ORDER BY e.ordinality), '[]'::jsonb),
               COALESCE(array_agg(e.ordinality::int ORDER BY e.ordinality), '{}')
          INTO checks, check_of
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e
          WHERE e.value ? 'check';
        IF jsonb_array_length(checks) > 0 THEN
          FOR d IN SELECT * FROM rate_limit_take_many(checks) LOOP
            decided[check_of[d.item + 1]] := d.allowed;
            left_of[check_of[d.item + 1]] := d.remaining;
            reset_of[check_of[d.item + 1]] := d.reset_ms;
          END LOOP;
        END IF;
        SELECT COALESCE(jsonb_agg(e.value - 'check' ORDER BY e.ordinality), '[]'::jsonb),
               COALESCE(array_agg(e.ordinality::int ORDER BY e.ordinality), '{}')
          INTO reserves, reserve_of
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e
          WHERE decided[e.ordinality] IS DISTINCT FROM false;
        IF jsonb_array_length(reserves) > 0 THEN
          FOR d IN SELECT * FROM budget_reserve_many(reserves, p_instance) LOOP
            item := reserve_of[d.item + 1] - 1;
            status := d.status; a := d.a; b := d.b;
            allowed := decided[item + 1]; remaining := left_of[item + 1]; reset_ms := reset_of[item + 1];
            RETURN NEXT;
          END LOOP;
        END IF;
        FOR i IN 1..n LOOP
          IF decided[i] = false THEN
            item := i - 1; status := 3; a := 0; b := 0;
            allowed := false; remaining := left_of[i]; reset_ms := reset_of[i];
            RETURN NEXT;
          END IF;
        END LOOP;
      END $$;
`;
