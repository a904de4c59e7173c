/**
 * Migration 22 of the PostgreSQL store: a call's reservation and its journal entry commit
 * durably before the call goes upstream (ARCHITECTURE.md §3 "The hard cap").
 *
 * Migrations 7 and 11 had budget_reserve_many and call_journal_open turn synchronous_commit
 * off for their transactions: a commit then returned before its WAL was written, which is
 * safe against an instance dying but not against PostgreSQL itself stopping. After a crash
 * (`pg_ctl stop -m immediate`) the last commits were gone, reservations and journal entries
 * of calls the upstream had already billed, so the counters admitted calls against budget
 * that was in fact spent: 101–110 % of a cap in an outside test.
 *
 * The shipped functions stay as they are (instances of the previous version, during a rolling
 * upgrade, call them). call_journal_open is replaced, as it is short. The reserve is wrapped:
 * budget_reserve_durable runs budget_reserve_limited_many and then gives synchronous_commit
 * back its configured value (RESET, to the server's, on by default), so the transaction that
 * holds the reservations and the journal entries commits with the server's durability. A
 * rate-limit check on its own still commits without waiting (rate_limit_take_many): a lost
 * count costs no money.
 */
export const DURABLE_RESERVE_SQL = `
      CREATE FUNCTION budget_reserve_durable(p_items jsonb, p_instance text)
        RETURNS TABLE (item int, status int, a bigint, b bigint, allowed boolean, remaining int, reset_ms bigint)
        LANGUAGE plpgsql AS $$
      BEGIN
        RETURN QUERY SELECT * FROM budget_reserve_limited_many(p_items, p_instance);
        -- The functions it ran turned durable commits off for the transaction.
        RESET synchronous_commit;
      END $$;

      CREATE OR REPLACE FUNCTION call_journal_open(p_entries jsonb) RETURNS void LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO call_journal SELECT * FROM jsonb_populate_recordset(NULL::call_journal, p_entries) ON CONFLICT (request_id) DO NOTHING;
      END $$;
`;
