/**
 * Migration 18 of the PostgreSQL store: the journal's two per-batch statements outside
 * budget_settle_many, a stream's generation ids and the ledger writer's end of its entries,
 * become functions that find each entry by its key, whatever the planner thought of the
 * table when it planned them (as migration 15 did for the budget functions).
 *
 * call_journal holds only the calls in flight, a few hundred rows, but every call inserts
 * an entry and deletes it, so between two autovacuum rounds (a minute apart) its file grows
 * to thousands of pages of dead entries. A session plans a statement once it has run it a
 * few times, and a plan made while the table was a page long scans it whole: in the bench,
 * (f)'s streams scanned a journal of 1,101 pages (470 live entries, 37,147 dead) 124 times a
 * second, and (g)'s writer 234 times (ARCHITECTURE.md §7 "Journal statements by key").
 * Without sequential scans, the plan reads each entry through the primary key.
 */
export const JOURNAL_BY_KEY_SQL = `
      -- A stream's generation id, once its first event names it: the reconciler looks the
      -- call up by it if the instance dies before the row is written.
      CREATE FUNCTION call_journal_identify(p_requests text[], p_generations text[]) RETURNS void LANGUAGE plpgsql
      SET enable_seqscan = off AS $$
      BEGIN
        UPDATE call_journal j SET generation_id = g.generation_id
        FROM unnest(p_requests, p_generations) AS g(request_id, generation_id)
        WHERE j.request_id = g.request_id;
      END $$;

      -- Calls whose rows are written are no longer in flight; returns how many entries it ended.
      CREATE FUNCTION call_journal_close(p_requests text[]) RETURNS int LANGUAGE plpgsql
      SET enable_seqscan = off AS $$
      DECLARE
        n int;
      BEGIN
        DELETE FROM call_journal WHERE request_id = ANY(p_requests);
        GET DIAGNOSTICS n = ROW_COUNT;
        RETURN n;
      END $$;
`;
