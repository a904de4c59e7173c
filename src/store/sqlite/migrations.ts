import type { Database } from "bun:sqlite";

/**
 * Numbered, append-only migrations. A shipped migration is never edited: add the next one.
 * Applied in one transaction each at start; `schema_migrations` records what ran.
 */
export const MIGRATIONS: ReadonlyArray<{ version: number; name: string; sql: string }> = [
  {
    version: 1,
    name: "apps, keys, connections, settings",
    sql: `
      CREATE TABLE apps (
        id            TEXT PRIMARY KEY,
        name          TEXT NOT NULL,
        origins_json  TEXT NOT NULL DEFAULT '[]',
        created_at    INTEGER NOT NULL,
        disabled_at   INTEGER
      );
      CREATE TABLE app_keys (
        id           TEXT PRIMARY KEY,
        app_id       TEXT NOT NULL REFERENCES apps(id),
        secret_hash  BLOB NOT NULL,
        created_at   INTEGER NOT NULL,
        revoked_at   INTEGER
      );
      CREATE INDEX app_keys_by_app ON app_keys(app_id);
      CREATE TABLE connections (
        app_id          TEXT NOT NULL REFERENCES apps(id),
        app_user_id     TEXT NOT NULL,
        monthly_cap_nano INTEGER NOT NULL,
        funding_status  TEXT NOT NULL DEFAULT 'ok' CHECK (funding_status IN ('ok', 'invalid')),
        connected_at    INTEGER NOT NULL,
        updated_at      INTEGER NOT NULL,
        revoked_at      INTEGER,
        PRIMARY KEY (app_id, app_user_id)
      );
      CREATE TABLE settings (
        key    TEXT PRIMARY KEY,
        value  TEXT NOT NULL
      );
    `,
  },
  {
    version: 2,
    name: "usage ledger and per-account totals",
    sql: `
      -- One row per metered request. request_id is the primary key so a replayed
      -- write can never count twice (INSERT OR IGNORE in the writer).
      CREATE TABLE usage_ledger (
        request_id        TEXT PRIMARY KEY,
        account           TEXT NOT NULL,
        app_id            TEXT NOT NULL,
        app_user_id       TEXT,
        grant_id          TEXT,
        period            TEXT NOT NULL,
        model             TEXT NOT NULL,
        generation_id     TEXT,
        prompt_tokens     INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        cost_nano         INTEGER NOT NULL,
        source            TEXT NOT NULL CHECK (source IN ('upstream', 'computed', 'estimated')),
        status            TEXT NOT NULL,
        streamed          INTEGER NOT NULL DEFAULT 0,
        started_at        INTEGER NOT NULL,
        finished_at       INTEGER NOT NULL
      );
      CREATE INDEX usage_ledger_by_user ON usage_ledger(app_id, app_user_id, period, started_at);
      CREATE INDEX usage_ledger_by_grant ON usage_ledger(grant_id) WHERE grant_id IS NOT NULL;
      -- Running totals per budget account, updated in the same transaction as the rows.
      CREATE TABLE usage_totals (
        account        TEXT PRIMARY KEY,
        spent_nano     INTEGER NOT NULL,
        request_count  INTEGER NOT NULL
      );
    `,
  },
  {
    version: 3,
    name: "one-time grants and consent tokens",
    sql: `
      ALTER TABLE apps ADD COLUMN max_grant_nano INTEGER;
      CREATE TABLE grants (
        id            TEXT PRIMARY KEY,
        app_id        TEXT NOT NULL REFERENCES apps(id),
        token_hash    BLOB NOT NULL UNIQUE,
        usd_cap_nano  INTEGER NOT NULL,
        max_uses      INTEGER,
        uses          INTEGER NOT NULL DEFAULT 0,
        origin        TEXT NOT NULL,
        created_at    INTEGER NOT NULL,
        expires_at    INTEGER NOT NULL,
        revoked_at    INTEGER
      );
      CREATE INDEX grants_by_app ON grants(app_id);
      -- The anti-forgery token embedded in a consent page: it pins what the page showed,
      -- and is consumed by the one approval it allows.
      CREATE TABLE consent_requests (
        token_hash    BLOB PRIMARY KEY,
        app_id        TEXT NOT NULL REFERENCES apps(id),
        usd_cap_nano  INTEGER NOT NULL,
        max_uses      INTEGER,
        ttl_seconds   INTEGER NOT NULL,
        origin        TEXT NOT NULL,
        state         TEXT NOT NULL,
        created_at    INTEGER NOT NULL,
        expires_at    INTEGER NOT NULL,
        used_at       INTEGER
      );
    `,
  },
  {
    version: 4,
    name: "idempotency keys of chat calls",
    sql: `
      -- One row per (app, Idempotency-Key): the claim of the call that runs, then the
      -- answer a retry with the same key is given instead of a second charge.
      CREATE TABLE idempotency_keys (
        app_id        TEXT NOT NULL,
        idem_key      TEXT NOT NULL,
        fingerprint   BLOB NOT NULL,
        request_id    TEXT NOT NULL,
        state         TEXT NOT NULL CHECK (state IN ('running', 'done')),
        lease_until   INTEGER NOT NULL,
        expires_at    INTEGER NOT NULL,
        status        INTEGER,
        content_type  TEXT,
        generation_id TEXT,
        body          BLOB,
        PRIMARY KEY (app_id, idem_key)
      );
      CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys(expires_at);
    `,
  },
  {
    version: 5,
    name: "reservations and overruns on ledger rows; frozen accounts",
    sql: `
      -- What the request reserved, and by how much its actual cost passed that (a price
      -- that changed under us): an audit trail for the hard cap.
      ALTER TABLE usage_ledger ADD COLUMN reserved_nano INTEGER;
      ALTER TABLE usage_ledger ADD COLUMN overrun_nano INTEGER NOT NULL DEFAULT 0;
      CREATE INDEX usage_ledger_overruns ON usage_ledger(account) WHERE overrun_nano > 0;
      -- After an overrun the account admits nothing more under a cap at or below this one,
      -- so an overrun can never compound (kept here so that a restart keeps the freeze).
      ALTER TABLE usage_totals ADD COLUMN frozen_cap_nano INTEGER;
    `,
  },
  {
    version: 6,
    name: "grant consent hardening: per-app daily ceiling, purgeable consent requests",
    sql: `
      -- The most grant dollars an app may have approved in one UTC day; NULL: the service
      -- default (GRANT_DAILY_CEILING_USD).
      ALTER TABLE apps ADD COLUMN grant_daily_ceiling_nano INTEGER;
      -- A consent request is dead once used or expired, whichever comes first (a use always
      -- comes before the expiry): the purge finds dead rows by this one expression.
      CREATE INDEX consent_requests_by_end ON consent_requests(COALESCE(used_at, expires_at));
      -- The approval sums an app's grants of the day; (app_id, created_at) also serves what
      -- grants_by_app did, so that index goes.
      CREATE INDEX grants_by_app_created ON grants(app_id, created_at);
      DROP INDEX grants_by_app;
    `,
  },
  {
    version: 7,
    name: "webhook endpoints and the outbox of events and deliveries",
    sql: `
      CREATE TABLE webhook_endpoints (
        id              TEXT PRIMARY KEY,
        app_id          TEXT NOT NULL REFERENCES apps(id),
        url             TEXT NOT NULL,
        secret          TEXT NOT NULL,
        event_types     TEXT,            -- JSON array; NULL: every type
        created_at      INTEGER NOT NULL,
        disabled_at     INTEGER,
        disabled_reason TEXT
      );
      CREATE INDEX webhook_endpoints_by_app ON webhook_endpoints(app_id);
      -- The outbox: an event is a row before anything is sent. dedup_key makes "at most
      -- one event per key" (a threshold per account and period) a constraint, not a race.
      CREATE TABLE webhook_events (
        id          TEXT PRIMARY KEY,
        app_id      TEXT NOT NULL,
        type        TEXT NOT NULL,
        payload     TEXT NOT NULL,
        dedup_key   TEXT UNIQUE,
        created_at  INTEGER NOT NULL
      );
      CREATE TABLE webhook_deliveries (
        event_id        TEXT NOT NULL REFERENCES webhook_events(id) ON DELETE CASCADE,
        endpoint_id     TEXT NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
        app_id          TEXT NOT NULL,
        state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER,
        last_status     INTEGER,
        last_error      TEXT,
        created_at      INTEGER NOT NULL,
        finished_at     INTEGER,
        PRIMARY KEY (event_id, endpoint_id)
      );
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at) WHERE state = 'pending';
      CREATE INDEX webhook_deliveries_by_app ON webhook_deliveries(app_id, created_at);
      CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries(endpoint_id);
    `,
  },
  {
    version: 8,
    name: "each endpoint's due webhook deliveries in order, for claims bounded per endpoint",
    sql: `
      CREATE INDEX webhook_deliveries_due_by_endpoint ON webhook_deliveries(endpoint_id, next_attempt_at) WHERE state = 'pending';
    `,
  },
  {
    version: 9,
    name: "the journal of calls that may have reached the upstream, and the leases of the processes that own them",
    sql: `
      CREATE TABLE call_journal (
        request_id           TEXT PRIMARY KEY,
        owner                TEXT NOT NULL,
        account              TEXT NOT NULL,
        ceiling_reservation  TEXT,
        app_id               TEXT NOT NULL,
        app_user_id          TEXT,
        grant_id             TEXT,
        period               TEXT NOT NULL,
        model                TEXT NOT NULL,
        streamed             INTEGER NOT NULL,
        started_at           INTEGER NOT NULL,
        reserved_nano        INTEGER NOT NULL,
        cap_nano             INTEGER NOT NULL,
        generation_id        TEXT,
        reconcile_reason     TEXT,
        attempts             INTEGER NOT NULL DEFAULT 0,
        next_attempt_at      INTEGER
      );
      CREATE INDEX call_journal_due ON call_journal(next_attempt_at) WHERE next_attempt_at IS NOT NULL;
      CREATE INDEX call_journal_by_ceiling ON call_journal(ceiling_reservation) WHERE ceiling_reservation IS NOT NULL;
      CREATE TABLE proxy_instances (id TEXT PRIMARY KEY, lease_until INTEGER NOT NULL);
      -- Rows settled from the upstream's record of a generation, or at their reservation
      -- (src/budget/usage-row.ts UsageSource). SQLite cannot widen a CHECK in place: the
      -- table is rebuilt with the same columns, in the same order, and its indexes.
      CREATE TABLE usage_ledger_next (
        request_id        TEXT PRIMARY KEY,
        account           TEXT NOT NULL,
        app_id            TEXT NOT NULL,
        app_user_id       TEXT,
        grant_id          TEXT,
        period            TEXT NOT NULL,
        model             TEXT NOT NULL,
        generation_id     TEXT,
        prompt_tokens     INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        cost_nano         INTEGER NOT NULL,
        source            TEXT NOT NULL CHECK (source IN ('upstream', 'computed', 'generation', 'reservation', 'estimated')),
        status            TEXT NOT NULL,
        streamed          INTEGER NOT NULL DEFAULT 0,
        started_at        INTEGER NOT NULL,
        finished_at       INTEGER NOT NULL,
        reserved_nano     INTEGER,
        overrun_nano      INTEGER NOT NULL DEFAULT 0
      );
      INSERT INTO usage_ledger_next SELECT request_id, account, app_id, app_user_id, grant_id, period, model, generation_id, prompt_tokens,
        completion_tokens, cost_nano, source, status, streamed, started_at, finished_at, reserved_nano, overrun_nano FROM usage_ledger;
      DROP TABLE usage_ledger;
      ALTER TABLE usage_ledger_next RENAME TO usage_ledger;
      CREATE INDEX usage_ledger_by_user ON usage_ledger(app_id, app_user_id, period, started_at);
      CREATE INDEX usage_ledger_by_grant ON usage_ledger(grant_id) WHERE grant_id IS NOT NULL;
      CREATE INDEX usage_ledger_overruns ON usage_ledger(account) WHERE overrun_nano > 0;
    `,
  },
  {
    version: 10,
    name: "funding sources: who pays a connection's calls, the user's own upstream key sealed, and pending PKCE flows",
    sql: `
      -- A JSON array, never empty: the sources an app's users may choose (src/store/apps.ts).
      ALTER TABLE apps ADD COLUMN funding_sources_json TEXT NOT NULL DEFAULT '["app"]';
      -- 'user': the user's own key pays, sealed in user_key_sealed (enc:v1:…, bound to the
      -- connection), named in views by its fingerprint. Every existing connection is 'app'.
      ALTER TABLE connections ADD COLUMN funding_source TEXT NOT NULL DEFAULT 'app' CHECK (funding_source IN ('app', 'user'));
      ALTER TABLE connections ADD COLUMN user_key_sealed TEXT;
      ALTER TABLE connections ADD COLUMN user_key_fingerprint TEXT;
      ALTER TABLE connections ADD COLUMN user_key_linked_at INTEGER;
      -- Between the redirect to the upstream's PKCE page and its callback (src/store/funding-flows.ts):
      -- the state only hashed, the code verifier sealed.
      CREATE TABLE funding_flows (
        state_hash        TEXT PRIMARY KEY,
        app_id            TEXT NOT NULL REFERENCES apps(id),
        app_user_id       TEXT NOT NULL,
        session_id        TEXT NOT NULL,
        code_verifier     TEXT NOT NULL,
        monthly_cap_nano  INTEGER NOT NULL,
        created_at        INTEGER NOT NULL,
        expires_at        INTEGER NOT NULL
      );
      CREATE INDEX funding_flows_by_expiry ON funding_flows(expires_at);
    `,
  },
  {
    version: 11,
    name: "the call journal records whose upstream key paid each call, so a user-funded call is reconciled with the user's key",
    sql: `
      -- Entries from before were all paid by the operator's key.
      ALTER TABLE call_journal ADD COLUMN payer TEXT NOT NULL DEFAULT 'app' CHECK (payer IN ('app', 'user'));
    `,
  },
  {
    version: 12,
    name: "the usage ledger's per-user index moves to a file of its own, written late and sorted; listing by app gets its own index",
    sql: `
      -- Its entries are kept in the file beside this one (src/store/sqlite/user-index.ts),
      -- written by the maintenance thread; until it has caught up, readers scan the rows it
      -- has not reached.
      DROP INDEX usage_ledger_by_user;
      -- Listing an app's rows by time (the usage export) used that index's first column; rows
      -- arrive in about that order, so this index grows at its end.
      CREATE INDEX usage_ledger_by_app_time ON usage_ledger(app_id, started_at);
    `,
  },
  {
    version: 13,
    name: "the call journal is keyed by request id alone (WITHOUT ROWID): each entry written, updated and deleted in one b-tree, not two",
    sql: `
      -- Every call inserts an entry, a stream updates it, and its ledger row deletes it: with
      -- a rowid, each of those also wrote the primary key's own index. Same columns, same
      -- order, same indexes.
      CREATE TABLE call_journal_next (
        request_id           TEXT PRIMARY KEY,
        owner                TEXT NOT NULL,
        account              TEXT NOT NULL,
        ceiling_reservation  TEXT,
        app_id               TEXT NOT NULL,
        app_user_id          TEXT,
        grant_id             TEXT,
        period               TEXT NOT NULL,
        model                TEXT NOT NULL,
        streamed             INTEGER NOT NULL,
        started_at           INTEGER NOT NULL,
        reserved_nano        INTEGER NOT NULL,
        cap_nano             INTEGER NOT NULL,
        generation_id        TEXT,
        reconcile_reason     TEXT,
        attempts             INTEGER NOT NULL DEFAULT 0,
        next_attempt_at      INTEGER,
        payer                TEXT NOT NULL DEFAULT 'app' CHECK (payer IN ('app', 'user'))
      ) WITHOUT ROWID;
      INSERT INTO call_journal_next SELECT request_id, owner, account, ceiling_reservation, app_id, app_user_id, grant_id, period, model,
        streamed, started_at, reserved_nano, cap_nano, generation_id, reconcile_reason, attempts, next_attempt_at, payer FROM call_journal;
      DROP TABLE call_journal;
      ALTER TABLE call_journal_next RENAME TO call_journal;
      CREATE INDEX call_journal_due ON call_journal(next_attempt_at) WHERE next_attempt_at IS NOT NULL;
      CREATE INDEX call_journal_by_ceiling ON call_journal(ceiling_reservation) WHERE ceiling_reservation IS NOT NULL;
    `,
  },
  {
    version: 14,
    name: "the call journal records a grant call's hold on its app's day, so a call settled from it freezes the day as a live one does",
    sql: `
      -- What the day's reservation holds and the ceiling it was made under; null for a
      -- user's call and on entries from before (which settle as they did).
      ALTER TABLE call_journal ADD COLUMN ceiling_reserved_nano INTEGER;
      ALTER TABLE call_journal ADD COLUMN ceiling_cap_nano INTEGER;
    `,
  },
  {
    version: 15,
    name: "the call journal records when the reconciler took each call over, so that giving up on its record counts from then",
    sql: `
      -- Set when the call is handed to the reconciler, or when a dead owner's running call is
      -- first taken; null while the call runs, and on entries from before, which get it at
      -- their next claim (src/metering/reconciler.ts gives up RECONCILE_GIVE_UP_SECONDS after it).
      ALTER TABLE call_journal ADD COLUMN reconciling_since INTEGER;
    `,
  },
];

export function migrate(db: Database): void {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
  const isApplied = db.query<{ version: number }, [number]>("SELECT version FROM schema_migrations WHERE version = ?");
  // Read first without the write lock, so that opening an up-to-date file takes none.
  const pending = MIGRATIONS.filter((m) => !isApplied.get(m.version));
  for (const m of pending) {
    // Checked again under the write lock (IMMEDIATE): processes opening the file together
    // each find what the one before them applied, instead of applying it again.
    db.transaction(() => {
      if (isApplied.get(m.version)) return;
      db.exec(m.sql);
      db.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(m.version, m.name, Date.now());
    }).immediate();
  }
}
