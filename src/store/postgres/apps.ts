import { DEFAULT_FUNDING_SOURCES, newAppId, type App, type AppChanges, type AppKey, type AppRepository, type AppSettings, type NewAppKey } from "../apps";
import type { FundingSource } from "../connections";
import { bytes, num, numOrNull, type PostgresDatabase } from "./database";

type Row = Record<string, unknown>;

const toApp = (r: Row): App => ({
  id: String(r.id),
  name: String(r.name),
  origins: JSON.parse(String(r.origins_json)) as string[],
  createdAt: num(r.created_at),
  disabledAt: numOrNull(r.disabled_at),
  maxGrantNano: numOrNull(r.max_grant_nano),
  grantDailyCeilingNano: numOrNull(r.grant_daily_ceiling_nano),
  fundingSources: JSON.parse(String(r.funding_sources_json)) as FundingSource[],
});

const toKey = (r: Row): AppKey => ({
  id: String(r.id),
  appId: String(r.app_id),
  secretHash: bytes(r.secret_hash),
  createdAt: num(r.created_at),
  revokedAt: numOrNull(r.revoked_at),
});

export class PostgresAppRepository implements AppRepository {
  constructor(private readonly db: PostgresDatabase) {}

  create(name: string, origins: string[], now: number, firstKey: NewAppKey, settings: AppSettings = {}): Promise<App> {
    const id = newAppId();
    const fundingSources = JSON.stringify(settings.fundingSources ?? DEFAULT_FUNDING_SOURCES);
    return this.db.run((sql) =>
      sql.begin(async (tx) => {
        const [app] = await tx`INSERT INTO apps (id, name, origins_json, created_at, max_grant_nano, grant_daily_ceiling_nano, funding_sources_json)
          VALUES (${id}, ${name}, ${JSON.stringify(origins)}, ${now}, ${settings.maxGrantNano ?? null}, ${settings.grantDailyCeilingNano ?? null}, ${fundingSources})
          RETURNING *`;
        await tx`INSERT INTO app_keys (id, app_id, secret_hash, created_at) VALUES (${firstKey.id}, ${id}, ${Buffer.from(firstKey.secretHash)}, ${now})`;
        return toApp(app);
      }),
    );
  }

  async find(id: string): Promise<App | null> {
    const [row] = await this.db.run((sql) => sql`SELECT * FROM apps WHERE id = ${id}`);
    return row ? toApp(row) : null;
  }

  async update(id: string, changes: AppChanges): Promise<App | null> {
    const origins = changes.origins ? JSON.stringify(changes.origins) : null;
    const fundingSources = changes.fundingSources ? JSON.stringify(changes.fundingSources) : null;
    // A null limit is a change (back to the default), so "keep" is told apart from null.
    const keepGrant = changes.maxGrantNano === undefined;
    const keepCeiling = changes.grantDailyCeilingNano === undefined;
    const [row] = await this.db.run(
      (sql) => sql`UPDATE apps SET name = COALESCE(${changes.name ?? null}, name), origins_json = COALESCE(${origins}, origins_json),
          funding_sources_json = COALESCE(${fundingSources}, funding_sources_json),
          max_grant_nano = CASE WHEN ${keepGrant} THEN max_grant_nano ELSE ${changes.maxGrantNano ?? null}::bigint END,
          grant_daily_ceiling_nano = CASE WHEN ${keepCeiling} THEN grant_daily_ceiling_nano ELSE ${changes.grantDailyCeilingNano ?? null}::bigint END
        WHERE id = ${id} RETURNING *`,
    );
    return row ? toApp(row) : null;
  }

  async setDisabled(id: string, at: number | null): Promise<boolean> {
    const rows = await this.db.run((sql) => sql`UPDATE apps SET disabled_at = ${at} WHERE id = ${id} RETURNING id`);
    return rows.length === 1;
  }

  async list(): Promise<App[]> {
    const rows: Row[] = await this.db.run((sql) => sql`SELECT * FROM apps ORDER BY created_at, id`);
    return rows.map(toApp);
  }

  async count(): Promise<number> {
    const [row] = await this.db.run((sql) => sql`SELECT count(*) AS n FROM apps`);
    return num(row.n);
  }

  async isRegisteredOrigin(origin: string): Promise<boolean> {
    const rows = await this.db.run((sql) => sql`SELECT 1 FROM apps WHERE disabled_at IS NULL AND origins_json::jsonb ? ${origin} LIMIT 1`);
    return rows.length > 0;
  }

  async addKey(appId: string, key: NewAppKey, now: number): Promise<void> {
    await this.db.run(
      (sql) => sql`INSERT INTO app_keys (id, app_id, secret_hash, created_at) VALUES (${key.id}, ${appId}, ${Buffer.from(key.secretHash)}, ${now})`,
    );
  }

  async revokeKey(appId: string, keyId: string, now: number): Promise<boolean> {
    const rows = await this.db.run(
      (sql) => sql`UPDATE app_keys SET revoked_at = ${now} WHERE id = ${keyId} AND app_id = ${appId} AND revoked_at IS NULL RETURNING id`,
    );
    return rows.length === 1;
  }

  async activeKeysOf(appId: string): Promise<AppKey[]> {
    const rows: Row[] = await this.db.run((sql) => sql`SELECT * FROM app_keys WHERE app_id = ${appId} AND revoked_at IS NULL`);
    return rows.map(toKey);
  }

  async keysOf(appId: string): Promise<AppKey[]> {
    const rows: Row[] = await this.db.run((sql) => sql`SELECT * FROM app_keys WHERE app_id = ${appId} ORDER BY created_at, id`);
    return rows.map(toKey);
  }
}
