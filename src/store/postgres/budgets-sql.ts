/**
 * Migration 3 of the PostgreSQL store: budgets kept in the database itself, for instances
 * that share nothing else (src/store/postgres/budget-ledger.ts calls these functions).
 * Shipped SQL is never edited: a change is a new migration.
 */
export const BUDGETS_SQL = `
      ALTER TABLE usage_totals ADD COLUMN reserved_nano bigint NOT NULL DEFAULT 0;
      -- One row per open reservation, owned by the instance that runs the request.
      CREATE TABLE budget_reservations (
        request_id text PRIMARY KEY,
        account text NOT NULL,
        amount_nano bigint NOT NULL,
        cap_nano bigint NOT NULL,
        instance_id text NOT NULL
      );
      CREATE INDEX budget_reservations_by_instance ON budget_reservations(instance_id);
      -- Each running instance renews its lease; the reservations of one whose lease ran out
      -- are released by the others (budget_reclaim).
      CREATE TABLE proxy_instances (id text PRIMARY KEY, lease_until timestamptz NOT NULL);

      -- Reserves between p_min and p_desired against p_cap, atomically: the account row is
      -- locked for the transaction, so concurrent reserves on it from any instance queue.
      -- status 1: granted (a = amount); 0: refused (a = spent, b = reserved); 2: frozen.
      CREATE FUNCTION budget_reserve(p_account text, p_request text, p_cap bigint, p_min bigint, p_desired bigint, p_instance text,
                                     OUT status int, OUT a bigint, OUT b bigint) LANGUAGE plpgsql AS $$
      DECLARE
        t usage_totals%ROWTYPE;
        granted bigint;
      BEGIN
        -- The account row stays locked until commit; a commit that waits for the disk would
        -- make every call of the account queue behind that wait. A reservation lost in a
        -- database crash is the exposure the Redis ledger already accepts (an account
        -- rebuilt without the calls in flight); settles, which write the rows, stay durable.
        PERFORM set_config('synchronous_commit', 'off', true);
        SELECT * INTO t FROM usage_totals WHERE account = p_account FOR UPDATE;
        IF NOT FOUND THEN
          INSERT INTO usage_totals (account) VALUES (p_account) ON CONFLICT DO NOTHING;
          SELECT * INTO t FROM usage_totals WHERE account = p_account FOR UPDATE;
        END IF;
        IF t.frozen_cap_nano IS NOT NULL AND p_cap <= t.frozen_cap_nano THEN
          status := 2; a := t.spent_nano; b := t.reserved_nano; RETURN;
        END IF;
        IF p_cap - t.spent_nano - t.reserved_nano < p_min THEN
          status := 0; a := t.spent_nano; b := t.reserved_nano; RETURN;
        END IF;
        granted := LEAST(p_desired, p_cap - t.spent_nano - t.reserved_nano);
        UPDATE usage_totals SET reserved_nano = reserved_nano + granted WHERE account = p_account;
        INSERT INTO budget_reservations (request_id, account, amount_nano, cap_nano, instance_id)
          VALUES (p_request, p_account, granted, p_cap, p_instance);
        status := 1; a := granted; b := 0;
      END $$;

      -- Releases the reservation (if it is still there: a reclaim may have released it) and,
      -- given the ledger row, writes it and adds its cost to the totals in the same
      -- transaction; the row's primary key makes a repeated settle change nothing. Without
      -- a row (a call refused after its reservation), the reservation itself is what makes
      -- it count once: p_actual is added only when the reservation was still there.
      -- A cost above the amount reserved freezes the account at the reservation's cap.
      -- Returns 1 when a row was new.
      CREATE FUNCTION budget_settle(p_request text, p_actual bigint, p_row jsonb) RETURNS int LANGUAGE plpgsql AS $$
      DECLARE
        r budget_reservations%ROWTYPE;
        inserted int := 0;
        released bigint;
        frozen bigint := (p_row->>'frozen_cap_nano')::bigint;
      BEGIN
        DELETE FROM budget_reservations WHERE request_id = p_request RETURNING * INTO r;
        IF p_row IS NULL THEN
          IF FOUND THEN
            UPDATE usage_totals SET reserved_nano = reserved_nano - r.amount_nano, spent_nano = spent_nano + p_actual,
              frozen_cap_nano = CASE WHEN p_actual > r.amount_nano THEN GREATEST(COALESCE(frozen_cap_nano, 0), r.cap_nano) ELSE frozen_cap_nano END
            WHERE account = r.account;
          END IF;
          RETURN 0;
        END IF;
        released := CASE WHEN FOUND THEN r.amount_nano ELSE 0 END;
        INSERT INTO usage_ledger SELECT * FROM jsonb_populate_record(NULL::usage_ledger, p_row) ON CONFLICT (request_id) DO NOTHING;
        GET DIAGNOSTICS inserted = ROW_COUNT;
        -- One write of the account row for both the release and the cost: the row is the
        -- hot spot every call of this account queues on.
        IF inserted = 1 OR released > 0 THEN
          INSERT INTO usage_totals (account, spent_nano, request_count, frozen_cap_nano)
            VALUES (p_row->>'account', inserted * (p_row->>'cost_nano')::bigint, inserted, CASE WHEN inserted = 1 THEN frozen END)
          ON CONFLICT (account) DO UPDATE SET
            reserved_nano = usage_totals.reserved_nano - released,
            spent_nano = usage_totals.spent_nano + EXCLUDED.spent_nano,
            request_count = usage_totals.request_count + EXCLUDED.request_count,
            frozen_cap_nano = CASE WHEN EXCLUDED.frozen_cap_nano IS NULL THEN usage_totals.frozen_cap_nano
                                   ELSE GREATEST(COALESCE(usage_totals.frozen_cap_nano, 0), EXCLUDED.frozen_cap_nano) END;
        END IF;
        RETURN inserted;
      END $$;

      -- Releases every reservation whose instance holds no live lease (it died: SIGKILL, OOM,
      -- a lost machine). Its spend is never counted twice: what it settled is in the ledger
      -- already, and a settle still arriving from an instance that was only slow finds no
      -- reservation and adds just its row. Returns the reservations released.
      CREATE FUNCTION budget_reclaim() RETURNS int LANGUAGE plpgsql AS $$
      DECLARE
        released int;
      BEGIN
        DELETE FROM proxy_instances WHERE lease_until < clock_timestamp();
        WITH gone AS (
          DELETE FROM budget_reservations r
          WHERE NOT EXISTS (SELECT 1 FROM proxy_instances i WHERE i.id = r.instance_id)
          RETURNING r.account, r.amount_nano
        ), per_account AS (
          SELECT account, sum(amount_nano) AS amount, count(*) AS n FROM gone GROUP BY account ORDER BY account
        ), released_rows AS (
          UPDATE usage_totals t SET reserved_nano = t.reserved_nano - p.amount FROM per_account p WHERE t.account = p.account RETURNING p.n
        )
        SELECT COALESCE(sum(n), 0) INTO released FROM released_rows;
        RETURN released;
      END $$;
`;
