import type { Database } from "bun:sqlite";
import { DEFAULT_FUNDING_SOURCES, newAppId, type App, type AppChanges, type AppKey, type AppRepository, type AppSettings, type NewAppKey } from "../apps";
import type { FundingSource } from "../connections";

interface AppRow {
  id: string;
  name: string;
  origins_json: string;
  created_at: number;
  disabled_at: number | null;
  max_grant_nano: number | null;
  grant_daily_ceiling_nano: number | null;
  funding_sources_json: string;
}

interface KeyRow {
  id: string;
  app_id: string;
  secret_hash: Uint8Array;
  created_at: number;
  revoked_at: number | null;
}

const toApp = (r: AppRow): App => ({
  id: r.id,
  name: r.name,
  origins: JSON.parse(r.origins_json) as string[],
  createdAt: r.created_at,
  disabledAt: r.disabled_at,
  maxGrantNano: r.max_grant_nano,
  grantDailyCeilingNano: r.grant_daily_ceiling_nano,
  fundingSources: JSON.parse(r.funding_sources_json) as FundingSource[],
});

const toKey = (r: KeyRow): AppKey => ({
  id: r.id,
  appId: r.app_id,
  secretHash: r.secret_hash,
  createdAt: r.created_at,
  revokedAt: r.revoked_at,
});

export class SqliteAppRepository implements AppRepository {
  private readonly byId;
  private readonly activeKeys;

  constructor(private readonly db: Database) {
    this.byId = db.query<AppRow, [string]>("SELECT * FROM apps WHERE id = ?");
    this.activeKeys = db.query<KeyRow, [string]>("SELECT * FROM app_keys WHERE app_id = ? AND revoked_at IS NULL");
  }

  async create(name: string, origins: string[], now: number, firstKey: NewAppKey, settings: AppSettings = {}): Promise<App> {
    const id = newAppId();
    const fundingSources = JSON.stringify(settings.fundingSources ?? DEFAULT_FUNDING_SOURCES);
    return this.db
      .transaction(() => {
        this.db
          .query(
            `INSERT INTO apps (id, name, origins_json, created_at, max_grant_nano, grant_daily_ceiling_nano, funding_sources_json)
             VALUES (?, ?, ?, ?, ?, ?, ?)`,
          )
          .run(id, name, JSON.stringify(origins), now, settings.maxGrantNano ?? null, settings.grantDailyCeilingNano ?? null, fundingSources);
        this.insertKey(id, firstKey, now);
        return toApp(this.byId.get(id)!);
      })
      .immediate();
  }

  async find(id: string): Promise<App | null> {
    const row = this.byId.get(id);
    return row ? toApp(row) : null;
  }

  async update(id: string, changes: AppChanges): Promise<App | null> {
    const current = this.byId.get(id);
    if (!current) return null;
    this.db
      .query("UPDATE apps SET name = ?, origins_json = ?, max_grant_nano = ?, grant_daily_ceiling_nano = ?, funding_sources_json = ? WHERE id = ?")
      .run(
        changes.name ?? current.name,
        changes.origins ? JSON.stringify(changes.origins) : current.origins_json,
        changes.maxGrantNano === undefined ? current.max_grant_nano : changes.maxGrantNano,
        changes.grantDailyCeilingNano === undefined ? current.grant_daily_ceiling_nano : changes.grantDailyCeilingNano,
        changes.fundingSources ? JSON.stringify(changes.fundingSources) : current.funding_sources_json,
        id,
      );
    return toApp(this.byId.get(id)!);
  }

  async setDisabled(id: string, at: number | null): Promise<boolean> {
    return this.db.query("UPDATE apps SET disabled_at = ? WHERE id = ?").run(at, id).changes === 1;
  }

  async list(): Promise<App[]> {
    return this.db.query<AppRow, []>("SELECT * FROM apps ORDER BY created_at, id").all().map(toApp);
  }

  async count(): Promise<number> {
    return this.db.query<{ n: number }, []>("SELECT count(*) AS n FROM apps").get()!.n;
  }

  async isRegisteredOrigin(origin: string): Promise<boolean> {
    return (
      this.db
        .query<{ one: number }, [string]>(
          `SELECT 1 AS one FROM apps, json_each(apps.origins_json) AS o
           WHERE apps.disabled_at IS NULL AND o.value = ? LIMIT 1`,
        )
        .get(origin) !== null
    );
  }

  async addKey(appId: string, key: NewAppKey, now: number): Promise<void> {
    this.insertKey(appId, key, now);
  }

  private insertKey(appId: string, key: NewAppKey, now: number): void {
    this.db.query("INSERT INTO app_keys (id, app_id, secret_hash, created_at) VALUES (?, ?, ?, ?)").run(key.id, appId, key.secretHash, now);
  }

  async revokeKey(appId: string, keyId: string, now: number): Promise<boolean> {
    const result = this.db.query("UPDATE app_keys SET revoked_at = ? WHERE id = ? AND app_id = ? AND revoked_at IS NULL").run(now, keyId, appId);
    return result.changes === 1;
  }

  async activeKeysOf(appId: string): Promise<AppKey[]> {
    return this.activeKeys.all(appId).map(toKey);
  }

  async keysOf(appId: string): Promise<AppKey[]> {
    return this.db.query<KeyRow, [string]>("SELECT * FROM app_keys WHERE app_id = ? ORDER BY created_at, id").all(appId).map(toKey);
  }
}
