import type { ReservedSQL, SQL } from "bun";
import { BUDGETS_SQL } from "./budgets-sql";
import { BUDGETS_BATCH_SQL } from "./budgets-batch-sql";
import { RATE_LIMITS_BATCH_SQL } from "./rate-limits-batch-sql";
import { RATE_LIMITS_SQL } from "./rate-limits-sql";
import { RATE_LIMIT_SWEEP_SQL } from "./rate-limit-sweep-sql";
import { RESERVE_LIMITED_BATCH_SQL } from "./reserve-limited-batch-sql";
import { CALL_JOURNAL_SQL } from "./call-journal-sql";
import { SETTLE_SET_SQL } from "./settle-set-sql";
import { JOURNAL_BY_KEY_SQL } from "./journal-by-key-sql";
import { DURABLE_RESERVE_SQL } from "./durable-reserve-sql";

/**
 * PostgreSQL migrations: numbered and append-only like the SQLite ones (../sqlite/migrations.ts),
 * whose schema they mirror with Postgres types (bigint for nano-dollars and epoch
 * milliseconds, bytea for hashes). Version 1 is the SQLite schema as of its version 5.
 *
 * Several instances may start at once: each takes the same advisory lock first, so one
 * applies what is pending and the others, once they get the lock, find nothing to do.
 */
export type PgMigration =
  | { version: number; name: string; sql: string }
  /**
   * Statements that cannot run in a transaction (`CREATE INDEX CONCURRENTLY`), run one by one
   * without a statement timeout. Each must be safe to run again: a process that stops
   * between them and the version's row runs them all again on its next start.
   */
  | { version: number; name: string; outsideTransaction: readonly string[] };

export const PG_MIGRATIONS: ReadonlyArray<PgMigration> = [
  {
    version: 1,
    name: "apps, keys, connections, settings, usage ledger and totals, grants, idempotency keys",
    sql: `
      CREATE TABLE apps (
        id text PRIMARY KEY,
        name text NOT NULL,
        origins_json text NOT NULL DEFAULT '[]',
        created_at bigint NOT NULL,
        disabled_at bigint,
        max_grant_nano bigint
      );
      CREATE TABLE app_keys (
        id text PRIMARY KEY,
        app_id text NOT NULL REFERENCES apps(id),
        secret_hash bytea NOT NULL,
        created_at bigint NOT NULL,
        revoked_at bigint
      );
      CREATE INDEX app_keys_by_app ON app_keys(app_id);
      CREATE TABLE connections (
        app_id text NOT NULL REFERENCES apps(id),
        app_user_id text NOT NULL,
        monthly_cap_nano bigint NOT NULL,
        funding_status text NOT NULL DEFAULT 'ok' CHECK (funding_status IN ('ok', 'invalid')),
        connected_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        revoked_at bigint,
        PRIMARY KEY (app_id, app_user_id)
      );
      CREATE TABLE settings (key text PRIMARY KEY, value text NOT NULL);
      CREATE TABLE usage_ledger (
        request_id text PRIMARY KEY,
        account text NOT NULL,
        app_id text NOT NULL,
        app_user_id text,
        grant_id text,
        period text NOT NULL,
        model text NOT NULL,
        generation_id text,
        prompt_tokens bigint NOT NULL DEFAULT 0,
        completion_tokens bigint NOT NULL DEFAULT 0,
        cost_nano bigint NOT NULL,
        source text NOT NULL CHECK (source IN ('upstream', 'computed', 'estimated')),
        status text NOT NULL,
        streamed boolean NOT NULL DEFAULT false,
        started_at bigint NOT NULL,
        finished_at bigint NOT NULL,
        reserved_nano bigint,
        overrun_nano bigint NOT NULL DEFAULT 0
      );
      CREATE INDEX usage_ledger_by_user ON usage_ledger(app_id, app_user_id, period, started_at);
      CREATE INDEX usage_ledger_by_grant ON usage_ledger(grant_id) WHERE grant_id IS NOT NULL;
      CREATE INDEX usage_ledger_overruns ON usage_ledger(account) WHERE overrun_nano > 0;
      CREATE TABLE usage_totals (
        account text PRIMARY KEY,
        spent_nano bigint NOT NULL DEFAULT 0,
        request_count bigint NOT NULL DEFAULT 0,
        frozen_cap_nano bigint
      );
      CREATE TABLE grants (
        id text PRIMARY KEY,
        app_id text NOT NULL REFERENCES apps(id),
        token_hash bytea NOT NULL UNIQUE,
        usd_cap_nano bigint NOT NULL,
        max_uses bigint,
        uses bigint NOT NULL DEFAULT 0,
        origin text NOT NULL,
        created_at bigint NOT NULL,
        expires_at bigint NOT NULL,
        revoked_at bigint
      );
      CREATE INDEX grants_by_app ON grants(app_id);
      CREATE TABLE consent_requests (
        token_hash bytea PRIMARY KEY,
        app_id text NOT NULL REFERENCES apps(id),
        usd_cap_nano bigint NOT NULL,
        max_uses bigint,
        ttl_seconds bigint NOT NULL,
        origin text NOT NULL,
        state text NOT NULL,
        created_at bigint NOT NULL,
        expires_at bigint NOT NULL,
        used_at bigint
      );
      CREATE TABLE idempotency_keys (
        app_id text NOT NULL,
        idem_key text NOT NULL,
        fingerprint bytea NOT NULL,
        request_id text NOT NULL,
        state text NOT NULL CHECK (state IN ('running', 'done')),
        lease_until bigint NOT NULL,
        expires_at bigint NOT NULL,
        status integer,
        content_type text,
        generation_id text,
        body bytea,
        PRIMARY KEY (app_id, idem_key)
      );
      CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys(expires_at);
    `,
  },
  {
    version: 2,
    name: "change notifications for the instances' caches",
    sql: `
      -- Every instance LISTENs on proxy_changes and drops what it cached for the row named
      -- (src/store/postgres/change-feed.ts). NOTIFY is delivered at commit, only if it commits.
      CREATE FUNCTION notify_proxy_change() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        r record := COALESCE(NEW, OLD);
      BEGIN
        IF TG_TABLE_NAME = 'connections' THEN
          PERFORM pg_notify('proxy_changes', 'connections ' || r.app_id || ' ' || r.app_user_id);
        ELSIF TG_TABLE_NAME = 'app_keys' THEN
          PERFORM pg_notify('proxy_changes', 'apps ' || r.app_id);
        ELSE
          PERFORM pg_notify('proxy_changes', 'apps ' || r.id);
        END IF;
        RETURN NULL;
      END $$;
      CREATE TRIGGER apps_changed AFTER INSERT OR UPDATE OR DELETE ON apps FOR EACH ROW EXECUTE FUNCTION notify_proxy_change();
      CREATE TRIGGER app_keys_changed AFTER INSERT OR UPDATE OR DELETE ON app_keys FOR EACH ROW EXECUTE FUNCTION notify_proxy_change();
      CREATE TRIGGER connections_changed AFTER INSERT OR UPDATE OR DELETE ON connections FOR EACH ROW EXECUTE FUNCTION notify_proxy_change();
    `,
  },
  {
    version: 3,
    name: "budgets in the database: reservations, instance leases, reserve and settle",
    sql: BUDGETS_SQL,
  },
  {
    version: 4,
    name: "rate limits shared by every instance",
    sql: RATE_LIMITS_SQL,
  },
  {
    version: 5,
    name: "grant consent hardening: per-app daily ceiling, purgeable consent requests",
    sql: `
      -- As SQLite's version 6 (../sqlite/migrations.ts), whose comments say why.
      ALTER TABLE apps ADD COLUMN grant_daily_ceiling_nano bigint;
      CREATE INDEX consent_requests_by_end ON consent_requests((COALESCE(used_at, expires_at)));
      CREATE INDEX grants_by_app_created ON grants(app_id, created_at);
      DROP INDEX grants_by_app;
    `,
  },
  {
    version: 6,
    name: "webhook endpoints and the outbox of events and deliveries",
    sql: `
      CREATE TABLE webhook_endpoints (
        id              text PRIMARY KEY,
        app_id          text NOT NULL REFERENCES apps(id),
        url             text NOT NULL,
        secret          text NOT NULL,
        event_types     text,
        created_at      bigint NOT NULL,
        disabled_at     bigint,
        disabled_reason text
      );
      CREATE INDEX webhook_endpoints_by_app ON webhook_endpoints(app_id);
      CREATE TABLE webhook_events (
        id          text PRIMARY KEY,
        app_id      text NOT NULL,
        type        text NOT NULL,
        payload     text NOT NULL,
        dedup_key   text UNIQUE,
        created_at  bigint NOT NULL
      );
      CREATE TABLE webhook_deliveries (
        event_id        text NOT NULL REFERENCES webhook_events(id) ON DELETE CASCADE,
        endpoint_id     text NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
        app_id          text NOT NULL,
        state           text NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
        attempts        integer NOT NULL DEFAULT 0,
        next_attempt_at bigint,
        last_status     integer,
        last_error      text,
        created_at      bigint NOT NULL,
        finished_at     bigint,
        PRIMARY KEY (event_id, endpoint_id)
      );
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at) WHERE state = 'pending';
      CREATE INDEX webhook_deliveries_by_app ON webhook_deliveries(app_id, created_at);
      CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries(endpoint_id);
    `,
  },
  {
    version: 7,
    name: "budget reserves and settles several at a time",
    sql: BUDGETS_BATCH_SQL,
  },
  {
    version: 8,
    name: "a batch's rate-limit checks of one key decided without a write per check",
    sql: RATE_LIMITS_BATCH_SQL,
  },
  {
    version: 9,
    name: "a chat call's rate-limit check in the same statement as its reservation",
    sql: RESERVE_LIMITED_BATCH_SQL,
  },
  {
    version: 10,
    name: "each endpoint's due webhook deliveries in order, for claims bounded per endpoint",
    sql: "CREATE INDEX webhook_deliveries_due_by_endpoint ON webhook_deliveries(endpoint_id, next_attempt_at) WHERE state = 'pending'",
  },
  {
    version: 11,
    name: "the journal of calls that may have reached the upstream; settles end their entry, and a dead instance's journaled reservations stay held",
    sql: CALL_JOURNAL_SQL,
  },
  {
    version: 12,
    name: "funding sources: who pays a connection's calls, the user's own upstream key sealed, and pending PKCE flows",
    sql: `
      -- As SQLite's version 10 (../sqlite/migrations.ts), whose comments say why.
      ALTER TABLE apps ADD COLUMN funding_sources_json text NOT NULL DEFAULT '["app"]';
      ALTER TABLE connections ADD COLUMN funding_source text NOT NULL DEFAULT 'app' CHECK (funding_source IN ('app', 'user'));
      ALTER TABLE connections ADD COLUMN user_key_sealed text;
      ALTER TABLE connections ADD COLUMN user_key_fingerprint text;
      ALTER TABLE connections ADD COLUMN user_key_linked_at bigint;
      CREATE TABLE funding_flows (
        state_hash        text PRIMARY KEY,
        app_id            text NOT NULL REFERENCES apps(id),
        app_user_id       text NOT NULL,
        session_id        text NOT NULL,
        code_verifier     text NOT NULL,
        monthly_cap_nano  bigint NOT NULL,
        created_at        bigint NOT NULL,
        expires_at        bigint NOT NULL
      );
      CREATE INDEX funding_flows_by_expiry ON funding_flows(expires_at);
    `,
  },
  {
    version: 13,
    name: "the call journal records whose upstream key paid each call, so a user-funded call is reconciled with the user's key",
    sql: `
      -- Nullable, read as 'app': call_journal_open fills rows from JSON, where a key left out is
      -- null, not the column's default, and an instance from before this migration (still
      -- running through a rolling start) leaves it out; all its calls were the operator's.
      ALTER TABLE call_journal ADD COLUMN payer text CHECK (payer IN ('app', 'user'));
    `,
  },
  {
    version: 14,
    name: "usage_totals pages kept four-fifths empty, so that updating a total leaves it on its page",
    sql: `
      -- Every reserve, settle and ledger batch updates its accounts' rows here. An update stays
      -- on its page (a HOT update: no new index entry, and the old version pruned in place)
      -- only if the page has room for the new version; packed full, most updates moved their
      -- row to another page and added an index entry. Measured with 1,000 accounts, two writer
      -- batches at once: 34 % of updates stayed on their page at the default fill (100), all
      -- of them at 20, with the table 10 times smaller (ARCHITECTURE.md §7). Only new pages
      -- are filled this way; rows move to them as their pages fill up.
      ALTER TABLE usage_totals SET (fillfactor = 20);
    `,
  },
  {
    version: 15,
    name: "the per-call budget and rate-limit functions find their rows by key, whatever the tables' statistics say",
    sql: `
      -- Each of these finds its rows by primary key, statement by statement, and PL/pgSQL keeps
      -- a plan per statement for the session. Planned from statistics taken while a table held
      -- a row or two (autovacuum analyses a young table often), the cheapest plan is a scan of
      -- the whole table, and it stays in use as the table grows until the next analyse. Seen
      -- in the bench: after usage_totals was analysed at one row, 10,000 accounts' reserves
      -- scanned it about 18,400 times in a minute (45.8 million rows read); rounds that met
      -- this served 596–875 calls/s, rounds after the next analyse 3,847–4,286
      -- (ARCHITECTURE.md §7 "Budget functions by key"). Without sequential scans, every plan
      -- of theirs uses the key.
      ALTER FUNCTION budget_reserve_many(jsonb, text) SET enable_seqscan = off;
      ALTER FUNCTION budget_settle_many(jsonb) SET enable_seqscan = off;
      ALTER FUNCTION rate_limit_take_many(jsonb) SET enable_seqscan = off;
    `,
  },
  {
    version: 16,
    name: "the sweep of idle rate-limit keys locks only the keys it forgets",
    sql: RATE_LIMIT_SWEEP_SQL,
  },
  {
    version: 17,
    name: "a batch of settles in one statement, not three statements per settle",
    sql: SETTLE_SET_SQL,
  },
  {
    version: 18,
    name: "the journal's generation ids and ends by key, however small the table was when planned",
    sql: JOURNAL_BY_KEY_SQL,
  },
  {
    version: 19,
    name: "listing an app's ledger rows by time (the usage export and reconcile) gets its own index",
    // Without it each page of 1,000 rows read the whole ledger and sorted it: 166–241 ms a
    // page at 1,000,000 rows (ARCHITECTURE.md §7 "App's rows by time"). Built CONCURRENTLY,
    // so that the ledger's writes (settles too, without Redis) go on while it is built; a
    // build cut short leaves an invalid index, which the next attempt drops first.
    outsideTransaction: [
      "DROP INDEX CONCURRENTLY IF EXISTS usage_ledger_by_app_time",
      "CREATE INDEX CONCURRENTLY usage_ledger_by_app_time ON usage_ledger (app_id, started_at, request_id)",
    ],
  },
  {
    version: 20,
    name: "the call journal records a grant call's hold on its app's day, so a call settled from it freezes the day as a live one does",
    // Nullable without a default: no rewrite of the table, a moment's lock.
    sql: `
      ALTER TABLE call_journal ADD COLUMN IF NOT EXISTS ceiling_reserved_nano bigint, ADD COLUMN IF NOT EXISTS ceiling_cap_nano bigint;
    `,
  },
  {
    version: 21,
    name: "the call journal records when the reconciler took each call over, so that giving up on its record counts from then",
    // As SQLite's version 15 (../sqlite/migrations.ts), whose comments say why. Nullable without
    // a default: no rewrite of the table; an instance from before (a rolling start) leaves it null.
    sql: `
      ALTER TABLE call_journal ADD COLUMN IF NOT EXISTS reconciling_since bigint;
    `,
  },
  {
    version: 22,
    name: "reservations and journal entries commit durably: a PostgreSQL crash loses none of a call that went upstream",
    sql: DURABLE_RESERVE_SQL,
  },
];

/** The advisory lock key every instance takes around migrations (any constant; this one spells "mmp1"). */
const MIGRATION_LOCK = 0x6d6d7031;

/** How often an instance asks for the migration lock while another holds it. */
const LOCK_POLL_MS = 50;

/** Applies pending migrations under the advisory lock; returns the versions this call applied. */
export async function migratePostgres(sql: SQL): Promise<number[]> {
  // One reserved connection: an advisory lock belongs to a session, not to the pool.
  const conn = await sql.reserve();
  try {
    // Asked for again and again, not waited for in one statement: a session waiting in
    // `pg_advisory_lock` holds a snapshot, and CREATE INDEX CONCURRENTLY waits for every older
    // snapshot to end, so the holder's build and the waiter would wait for each other.
    for (;;) {
      const [row]: Array<{ locked: boolean }> = await conn`SELECT pg_try_advisory_lock(${MIGRATION_LOCK}) AS locked`;
      if (row?.locked) break;
      await Bun.sleep(LOCK_POLL_MS);
    }
    try {
      await conn`CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`;
      const rows: Array<{ version: number }> = await conn`SELECT version FROM schema_migrations`;
      const applied = new Set(rows.map((r) => Number(r.version)));
      const ran: number[] = [];
      for (const m of PG_MIGRATIONS) {
        if (applied.has(m.version)) continue;
        if ("outsideTransaction" in m) {
          await runOutsideTransaction(conn, m.outsideTransaction);
          await conn`INSERT INTO schema_migrations (version, name, applied_at) VALUES (${m.version}, ${m.name}, ${Date.now()})`;
        } else {
          await conn.begin(async (tx) => {
            await tx.unsafe(m.sql);
            await tx`INSERT INTO schema_migrations (version, name, applied_at) VALUES (${m.version}, ${m.name}, ${Date.now()})`;
          });
        }
        ran.push(m.version);
      }
      return ran;
    } finally {
      await conn`SELECT pg_advisory_unlock(${MIGRATION_LOCK})`;
    }
  } finally {
    conn.release();
  }
}

/** An index built on a large ledger outlasts the service's statement timeout; the session's own comes back after. */
async function runOutsideTransaction(conn: ReservedSQL, statements: readonly string[]): Promise<void> {
  await conn`SET statement_timeout = 0`;
  try {
    for (const statement of statements) await conn.unsafe(statement);
  } finally {
    await conn`RESET statement_timeout`;
  }
}
