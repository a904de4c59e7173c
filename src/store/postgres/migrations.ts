import type { SQL } from "bun";

/**
 * PostgreSQL migrations: numbered and append-only like the SQLite ones (../sqlite/migrations.ts),
 * whose schema they mirror with Postgres types (bigint for nano-dollars and epoch
 * milliseconds, bytea for hashes). Version 1 is the SQLite schema as of its version 5.
 *
 * Several instances may start at once: each takes the same advisory lock first, so one
 * applies what is pending and the others, once they get the lock, find nothing to do.
 */
export const PG_MIGRATIONS: ReadonlyArray<{ version: number; name: string; sql: string }> = [
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
    sql: `
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
        IF FOUND THEN
          UPDATE usage_totals SET reserved_nano = reserved_nano - r.amount_nano WHERE account = r.account;
        END IF;
        INSERT INTO usage_ledger SELECT * FROM jsonb_populate_record(NULL::usage_ledger, p_row) ON CONFLICT (request_id) DO NOTHING;
        GET DIAGNOSTICS inserted = ROW_COUNT;
        IF inserted = 1 THEN
          INSERT INTO usage_totals (account, spent_nano, request_count, frozen_cap_nano)
            VALUES (p_row->>'account', (p_row->>'cost_nano')::bigint, 1, frozen)
          ON CONFLICT (account) DO UPDATE SET
            spent_nano = usage_totals.spent_nano + EXCLUDED.spent_nano,
            request_count = usage_totals.request_count + 1,
            frozen_cap_nano = CASE WHEN frozen IS NULL THEN usage_totals.frozen_cap_nano
                                   ELSE GREATEST(COALESCE(usage_totals.frozen_cap_nano, 0), frozen) END;
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
    `,
  },
  {
    version: 4,
    name: "rate limits shared by every instance",
    sql: `
      -- The sliding-window log of admitted requests per key (src/ratelimit/rate-limiter.ts),
      -- unlogged: losing it in a database crash only reopens the windows.
      CREATE UNLOGGED TABLE rate_limit_hits (key text NOT NULL, at_ms bigint NOT NULL);
      CREATE INDEX rate_limit_hits_by_key ON rate_limit_hits(key, at_ms);
      -- One transaction-scoped advisory lock per key serializes takers of the same key.
      CREATE FUNCTION rate_limit_take(p_key text, p_limit int, p_window bigint, p_now bigint,
                                      OUT allowed boolean, OUT remaining int, OUT reset_ms bigint) LANGUAGE plpgsql AS $$
      DECLARE
        n int;
        oldest bigint;
      BEGIN
        PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 0));
        DELETE FROM rate_limit_hits WHERE key = p_key AND at_ms <= p_now - p_window;
        SELECT count(*), min(at_ms) INTO n, oldest FROM rate_limit_hits WHERE key = p_key;
        IF n >= p_limit THEN
          allowed := false; remaining := 0; reset_ms := GREATEST(1, oldest + p_window - p_now); RETURN;
        END IF;
        INSERT INTO rate_limit_hits (key, at_ms) VALUES (p_key, p_now);
        allowed := true; remaining := p_limit - n - 1; reset_ms := COALESCE(oldest, p_now) + p_window - p_now;
      END $$;
    `,
  },
];

/** The advisory lock key every instance takes around migrations (any constant; this one spells "mmp1"). */
const MIGRATION_LOCK = 0x6d6d7031;

/** Applies pending migrations under the advisory lock; returns the versions this call applied. */
export async function migratePostgres(sql: SQL): Promise<number[]> {
  // One reserved connection: an advisory lock belongs to a session, not to the pool.
  const conn = await sql.reserve();
  try {
    await conn`SELECT pg_advisory_lock(${MIGRATION_LOCK})`;
    try {
      await conn`CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`;
      const rows: Array<{ version: number }> = await conn`SELECT version FROM schema_migrations`;
      const applied = new Set(rows.map((r) => Number(r.version)));
      const ran: number[] = [];
      for (const m of PG_MIGRATIONS) {
        if (applied.has(m.version)) continue;
        await conn.begin(async (tx) => {
          await tx.unsafe(m.sql);
          await tx`INSERT INTO schema_migrations (version, name, applied_at) VALUES (${m.version}, ${m.name}, ${Date.now()})`;
        });
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
