/**
 * Migration 17 of the PostgreSQL store: budget_settle_many (migration 11) settles its batch
 * in one statement instead of a loop of three statements per item.
 *
 * Migration 11's loop ran, for each item, the release of its reservation, the end of its
 * journal entry and the insert of its row, each a statement PL/pgSQL starts and ends on its
 * own. Here each of those is one statement over the whole batch, and the totals another.
 * The same 16-row batches over 10,000 accounts, in turns on one server (fsync on): 62.5–72.9
 * µs of the backend's CPU a row before, 45.8–50.0 after (scripts/bench/settle-batch-postgres.ts;
 * ARCHITECTURE.md §7 "Settles by the batch").
 *
 * What each item does is migration 11's, item by item:
 * - the first item of a request releases its reservation, if one is held;
 * - the first item of a request that carries a row writes it, unless the ledger has it
 *   (a replay changes nothing);
 * - an item with no row counts its actual cost against the reservation it released, and
 *   a cost above that reservation freezes the account at the reservation's cap;
 * - each account's totals are written once, in account order (the order reserves lock
 *   them in), with the sums of its items.
 * Statements of one query share a snapshot and cannot see each other's changes; none of
 * these needs to: each reads the items and what it alone changed (RETURNING).
 */
export const SETTLE_SET_SQL = `
      CREATE OR REPLACE FUNCTION budget_settle_many(p_items jsonb) RETURNS int LANGUAGE plpgsql
      SET enable_seqscan = off AS $$
      DECLARE
        n int;
      BEGIN
        WITH items AS MATERIALIZED (
          SELECT e.ordinality AS pos, e.value->>'request' AS request, (e.value->>'actual')::bigint AS actual,
            NULLIF(e.value->'row', 'null'::jsonb) AS row
          FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e
        ),
        firsts AS (
          SELECT request, min(pos) AS first_pos, min(pos) FILTER (WHERE row IS NOT NULL) AS first_row_pos
          FROM items GROUP BY request
        ),
        released AS (
          DELETE FROM budget_reservations r WHERE r.request_id IN (SELECT request FROM items)
          RETURNING r.request_id, r.account, r.amount_nano, r.cap_nano
        ),
        ended AS (
          DELETE FROM call_journal j WHERE j.request_id IN (SELECT request FROM items)
        ),
        written AS (
          INSERT INTO usage_ledger
          SELECT p.* FROM items i, LATERAL jsonb_populate_record(NULL::usage_ledger, i.row) AS p
          WHERE i.row IS NOT NULL ORDER BY i.pos
          ON CONFLICT (request_id) DO NOTHING
          RETURNING request_id
        ),
        effects AS (
          SELECT COALESCE(i.row->>'account', r.account) AS account,
            COALESCE(r.amount_nano, 0) AS released,
            CASE WHEN i.row IS NULL THEN i.actual WHEN w.request_id IS NOT NULL THEN (i.row->>'cost_nano')::bigint ELSE 0 END AS spent,
            CASE WHEN w.request_id IS NOT NULL THEN 1 ELSE 0 END AS counted,
            CASE WHEN i.row IS NULL THEN CASE WHEN i.actual > r.amount_nano THEN r.cap_nano END
                 WHEN w.request_id IS NOT NULL THEN (i.row->>'frozen_cap_nano')::bigint END AS frozen
          FROM items i
          JOIN firsts f ON f.request = i.request
          LEFT JOIN released r ON r.request_id = i.request AND i.pos = f.first_pos
          LEFT JOIN written w ON w.request_id = i.request AND i.pos = f.first_row_pos
          WHERE r.request_id IS NOT NULL OR w.request_id IS NOT NULL
        ),
        sums AS (
          SELECT account, sum(released)::bigint AS released, sum(spent)::bigint AS spent, sum(counted)::bigint AS counted, max(frozen) AS frozen
          FROM effects GROUP BY account
        ),
        totals AS (
          INSERT INTO usage_totals (account, spent_nano, request_count, frozen_cap_nano)
          SELECT account, spent, counted, frozen FROM sums ORDER BY account
          ON CONFLICT (account) DO UPDATE SET
            reserved_nano = usage_totals.reserved_nano - (SELECT s.released FROM sums s WHERE s.account = EXCLUDED.account),
            spent_nano = usage_totals.spent_nano + EXCLUDED.spent_nano,
            request_count = usage_totals.request_count + EXCLUDED.request_count,
            frozen_cap_nano = CASE WHEN EXCLUDED.frozen_cap_nano IS NULL THEN usage_totals.frozen_cap_nano
                                   ELSE GREATEST(COALESCE(usage_totals.frozen_cap_nano, 0), EXCLUDED.frozen_cap_nano) END
        )
        SELECT count(*) INTO n FROM written;
        RETURN n;
      END $$;
`;
