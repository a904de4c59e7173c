/**
 * Migration 11 of the PostgreSQL store: the journal of calls that may have reached the
 * upstream (src/store/call-journal.ts). Shipped SQL is never edited: this migration
 * replaces two functions of migration 7 with versions that know the journal.
 *
 * - budget_settle_many also deletes the settled call's journal entry, in its transaction:
 *   the row and the end of the entry are one step.
 * - budget_reclaim no longer releases every reservation of an instance whose lease ran out:
 *   one whose call is in the journal may have been billed by the upstream, so it stays
 *   held until the reconciler settles it (at the upstream's record, or at the reservation);
 *   only a reservation with no journal entry (its call never went upstream) is released.
 */
export const CALL_JOURNAL_SQL = `
      -- Rows settled from the upstream's record of a generation, or at their reservation.
      ALTER TABLE usage_ledger DROP CONSTRAINT usage_ledger_source_check,
        ADD CONSTRAINT usage_ledger_source_check CHECK (source IN ('upstream', 'computed', 'generation', 'reservation', 'estimated'));
      CREATE TABLE call_journal (
        request_id           text PRIMARY KEY,
        owner                text NOT NULL,
        account              text NOT NULL,
        ceiling_reservation  text,
        app_id               text NOT NULL,
        app_user_id          text,
        grant_id             text,
        period               text NOT NULL,
        model                text NOT NULL,
        streamed             boolean NOT NULL,
        started_at           bigint NOT NULL,
        reserved_nano        bigint NOT NULL,
        cap_nano             bigint NOT NULL,
        generation_id        text,
        reconcile_reason     text,
        attempts             integer NOT NULL DEFAULT 0,
        next_attempt_at      bigint
      );
      CREATE INDEX call_journal_due ON call_journal(next_attempt_at) WHERE next_attempt_at IS NOT NULL;
      CREATE INDEX call_journal_by_ceiling ON call_journal(ceiling_reservation) WHERE ceiling_reservation IS NOT NULL;

      -- Opens a batch of entries in one statement. Like a reservation, an entry commits
      -- without waiting for the disk: it guards against an instance dying, which a commit in
      -- the server's memory survives, not against the database itself crashing (where the
      -- reservations it belongs with are lost too).
      CREATE FUNCTION call_journal_open(p_entries jsonb) RETURNS void LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM set_config('synchronous_commit', 'off', true);
        INSERT INTO call_journal SELECT * FROM jsonb_populate_recordset(NULL::call_journal, p_entries) ON CONFLICT (request_id) DO NOTHING;
      END $$;

      CREATE OR REPLACE FUNCTION budget_settle_many(p_items jsonb) RETURNS int LANGUAGE plpgsql AS $$
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
          DELETE FROM call_journal WHERE request_id = x.request;
          IF x.row IS NULL THEN
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
              AND NOT EXISTS (SELECT 1 FROM call_journal j WHERE j.request_id = r.request_id)
              AND NOT EXISTS (SELECT 1 FROM call_journal j WHERE j.ceiling_reservation = r.request_id)
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
