/**
 * Migration 7 of the PostgreSQL store: reserves, settles and rate-limit checks taken several
 * at a time (src/store/postgres/budget-ledger.ts and src/store/postgres/rate-limiter.ts
 * send what queued while their previous batch ran).
 * The items of a batch are taken one after the other against the counters, as migration 3's
 * budget_reserve and budget_settle take one call each, so the cap holds exactly as before.
 * What changes is how often the account row is written and committed: once per account per
 * batch instead of once per call. Every call of an account queued on that row, and every
 * write of it left a version that the next ones walked past (ARCHITECTURE.md §7 "Budgets in
 * batches").
 *
 * Lock order: a batch that locks several account rows takes them in account order, and so
 * does budget_reclaim now, so two such transactions cannot deadlock on them. A settle batch
 * takes its account rows last, after its reservations and ledger rows.
 *
 * Rate-limit checks are migration 4's rate_limit_take, one after the other in key order, in
 * one transaction: the key's row is still written per check, but locked and committed once.
 * (Migration 8, ./rate-limits-batch-sql.ts, replaces that function with one that writes it
 * once per batch.)
 *
 * Migration 3's budget_reserve and budget_settle stay: instances of the previous version,
 * still running during a rolling upgrade, call them.
 */
export const BUDGETS_BATCH_SQL = `
      -- p_items: [{"account", "request", "cap", "min", "desired"}, ...]. One result row per
      -- item, with the item's position (0-based): status, a and b as budget_reserve's, or
      -- status -1 when the request already holds a reservation (nothing reserved). Each
      -- account row is locked once and written once, with what the batch granted on it.
      CREATE FUNCTION budget_reserve_many(p_items jsonb, p_instance text)
        RETURNS TABLE (item int, status int, a bigint, b bigint) LANGUAGE plpgsql AS $$
      DECLARE
        x record;
        t usage_totals%ROWTYPE;
        held text := NULL;
        granted bigint;
        changed boolean := false;
      BEGIN
        -- As budget_reserve: reservations commit without waiting for the disk.
        PERFORM set_config('synchronous_commit', 'off', true);
        FOR x IN
          SELECT (e.ordinality - 1)::int AS pos, e.value->>'account' AS account, e.value->>'request' AS request,
                 (e.value->>'cap')::bigint AS cap, (e.value->>'min')::bigint AS min_nano, (e.value->>'desired')::bigint AS desired
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e
          ORDER BY 2, e.ordinality
        LOOP
          IF held IS DISTINCT FROM x.account THEN
            IF changed THEN
              UPDATE usage_totals SET reserved_nano = t.reserved_nano WHERE account = held;
            END IF;
            held := x.account;
            changed := false;
            SELECT * INTO t FROM usage_totals WHERE account = x.account FOR UPDATE;
            IF NOT FOUND THEN
              INSERT INTO usage_totals (account) VALUES (x.account) ON CONFLICT DO NOTHING;
              SELECT * INTO t FROM usage_totals WHERE account = x.account FOR UPDATE;
            END IF;
          END IF;
          item := x.pos;
          IF EXISTS (SELECT 1 FROM budget_reservations WHERE request_id = x.request) THEN
            status := -1; a := 0; b := 0;
          ELSIF t.frozen_cap_nano IS NOT NULL AND x.cap <= t.frozen_cap_nano THEN
            status := 2; a := t.spent_nano; b := t.reserved_nano;
          ELSIF x.cap - t.spent_nano - t.reserved_nano < x.min_nano THEN
            status := 0; a := t.spent_nano; b := t.reserved_nano;
          ELSE
            granted := LEAST(x.desired, x.cap - t.spent_nano - t.reserved_nano);
            -- The row is locked until commit: nothing else moves it meanwhile.
            t.reserved_nano := t.reserved_nano + granted;
            changed := true;
            INSERT INTO budget_reservations (request_id, account, amount_nano, cap_nano, instance_id)
              VALUES (x.request, x.account, granted, x.cap, p_instance);
            status := 1; a := granted; b := 0;
          END IF;
          RETURN NEXT;
        END LOOP;
        IF changed THEN
          UPDATE usage_totals SET reserved_nano = t.reserved_nano WHERE account = held;
        END IF;
      END $$;

      -- p_items: [{"request", "actual", "row"}, ...], "row" null for a settle without one.
      -- Each item as budget_settle: its reservation released (if still there), its row
      -- written once (the primary key makes a repeat change nothing), a cost above the
      -- reservation freezing the account at the reservation's cap. Then each account's
      -- totals are written once, with the sum of its items. Durable: the commit waits for
      -- the disk, once for the batch. Returns how many rows were new.
      CREATE FUNCTION budget_settle_many(p_items jsonb) RETURNS int LANGUAGE plpgsql AS $$
      DECLARE
        x record;
        r budget_reservations%ROWTYPE;
        had_reservation boolean;
        inserted int;
        n int := 0;
        accounts text[] := '{}';
        released bigint[] := '{}';
        spent bigint[] := '{}';
        counted int[] := '{}';
        frozen bigint[] := '{}';
        d record;
      BEGIN
        FOR x IN
          SELECT e.value->>'request' AS request, (e.value->>'actual')::bigint AS actual, NULLIF(e.value->'row', 'null'::jsonb) AS row
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e
          ORDER BY e.ordinality
        LOOP
          DELETE FROM budget_reservations WHERE request_id = x.request RETURNING * INTO r;
          had_reservation := FOUND;
          IF x.row IS NULL THEN
            -- A call refused after its reservation: the reservation makes it count once.
            IF had_reservation THEN
              accounts := accounts || r.account;
              released := released || r.amount_nano;
              spent := spent || x.actual;
              counted := counted || 0;
              frozen := frozen || CASE WHEN x.actual > r.amount_nano THEN r.cap_nano END;
            END IF;
            CONTINUE;
          END IF;
          INSERT INTO usage_ledger SELECT * FROM jsonb_populate_record(NULL::usage_ledger, x.row) ON CONFLICT (request_id) DO NOTHING;
          GET DIAGNOSTICS inserted = ROW_COUNT;
          n := n + inserted;
          IF inserted = 1 OR had_reservation THEN
            accounts := accounts || (x.row->>'account');
            released := released || CASE WHEN had_reservation THEN r.amount_nano ELSE 0 END;
            spent := spent || inserted * (x.row->>'cost_nano')::bigint;
            counted := counted || inserted;
            frozen := frozen || CASE WHEN inserted = 1 THEN (x.row->>'frozen_cap_nano')::bigint END;
          END IF;
        END LOOP;
        FOR d IN
          SELECT u.account, sum(u.released)::bigint AS released, sum(u.spent)::bigint AS spent, sum(u.counted)::bigint AS counted, max(u.frozen) AS frozen
          FROM unnest(accounts, released, spent, counted, frozen) AS u(account, released, spent, counted, frozen)
          GROUP BY u.account
          ORDER BY u.account
        LOOP
          INSERT INTO usage_totals (account, spent_nano, request_count, frozen_cap_nano)
            VALUES (d.account, d.spent, d.counted, d.frozen)
          ON CONFLICT (account) DO UPDATE SET
            reserved_nano = usage_totals.reserved_nano - d.released,
            spent_nano = usage_totals.spent_nano + EXCLUDED.spent_nano,
            request_count = usage_totals.request_count + EXCLUDED.request_count,
            frozen_cap_nano = CASE WHEN EXCLUDED.frozen_cap_nano IS NULL THEN usage_totals.frozen_cap_nano
                                   ELSE GREATEST(COALESCE(usage_totals.frozen_cap_nano, 0), EXCLUDED.frozen_cap_nano) END;
        END LOOP;
        RETURN n;
      END $$;

      -- p_items: [{"key", "limit", "window", "now"}, ...]. One result row per item, with its
      -- position (0-based), as rate_limit_take answers it.
      CREATE FUNCTION rate_limit_take_many(p_items jsonb)
        RETURNS TABLE (item int, allowed boolean, remaining int, reset_ms bigint) LANGUAGE plpgsql AS $$
      DECLARE
        x record;
        r record;
      BEGIN
        FOR x IN
          SELECT (e.ordinality - 1)::int AS pos, e.value AS v
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e
          ORDER BY e.value->>'key', e.ordinality
        LOOP
          SELECT * INTO r FROM rate_limit_take(x.v->>'key', (x.v->>'limit')::int, (x.v->>'window')::bigint, (x.v->>'now')::bigint);
          item := x.pos; allowed := r.allowed; remaining := r.remaining; reset_ms := r.reset_ms;
          RETURN NEXT;
        END LOOP;
      END $$;

      -- As migration 3's, but the accounts' rows are written one by one in account order
      -- (an UPDATE ... FROM locks them in whatever order its join yields).
      CREATE OR REPLACE FUNCTION budget_reclaim() RETURNS int LANGUAGE plpgsql AS $$
      DECLARE
        released int := 0;
        g record;
      BEGIN
        DELETE FROM proxy_instances WHERE lease_until < clock_timestamp();
        FOR g IN
          WITH gone AS (
            DELETE FROM budget_reservations r
            WHERE NOT EXISTS (SELECT 1 FROM proxy_instances i WHERE i.id = r.instance_id)
            RETURNING r.account, r.amount_nano
          )
          SELECT account, sum(amount_nano) AS amount, count(*)::int AS n FROM gone GROUP BY account ORDER BY account
        LOOP
          UPDATE usage_totals SET reserved_nano = reserved_nano - g.amount WHERE account = g.account;
          IF FOUND THEN released := released + g.n; END IF;
        END LOOP;
        RETURN released;
      END $$;
`;
