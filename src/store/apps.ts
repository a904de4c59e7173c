import type { Database } from "bun:sqlite";
import { LOWER_ALNUM, randomString } from "../random";
import { formatSecretKey, generateSecret, hashSecret } from "../auth/secret-key";

export interface App {
  id: string;
  name: string;
  origins: string[];
  createdAt: number;
  disabledAt: number | null;
  /** Largest one-time grant this app may ask for; null: the service default. */
  maxGrantNano: number | null;
}

export interface AppKey {
  id: string;
  appId: string;
  secretHash: Uint8Array;
  createdAt: number;
  revokedAt: number | null;
}

/** A key as shown to the operator, once, at creation. */
export interface IssuedKey {
  keyId: string;
  secretKey: string;
}

interface AppRow {
  id: string;
  name: string;
  origins_json: string;
  created_at: number;
  disabled_at: number | null;
  max_grant_nano: number | null;
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
});

const toKey = (r: KeyRow): AppKey => ({
  id: r.id,
  appId: r.app_id,
  secretHash: r.secret_hash,
  createdAt: r.created_at,
  revokedAt: r.revoked_at,
});

/** Apps and their secret keys (several per app, so keys can be rotated without downtime). */
export class AppRepository {
  private readonly byId;
  private readonly activeKeys;

  constructor(private readonly db: Database) {
    this.byId = db.query<AppRow, [string]>("SELECT * FROM apps WHERE id = ?");
    this.activeKeys = db.query<KeyRow, [string]>("SELECT * FROM app_keys WHERE app_id = ? AND revoked_at IS NULL");
  }

  create(name: string, origins: string[], now: number, maxGrantNano: number | null = null): { app: App; key: IssuedKey } {
    // App ids never contain "_" so that `sk_live_{appId}_{secret}` splits unambiguously.
    const id = `app${randomString(13, LOWER_ALNUM)}`;
    return this.db
      .transaction(() => {
        this.db
          .query("INSERT INTO apps (id, name, origins_json, created_at, max_grant_nano) VALUES (?, ?, ?, ?, ?)")
          .run(id, name, JSON.stringify(origins), now, maxGrantNano);
        return { app: this.find(id)!, key: this.issueKey(id, now) };
      })
      .immediate();
  }

  find(id: string): App | null {
    const row = this.byId.get(id);
    return row ? toApp(row) : null;
  }

  list(): App[] {
    return this.db.query<AppRow, []>("SELECT * FROM apps ORDER BY created_at, id").all().map(toApp);
  }

  count(): number {
    return this.db.query<{ n: number }, []>("SELECT count(*) AS n FROM apps").get()!.n;
  }

  /** True when some active app registered this origin (used to answer CORS preflights). */
  isRegisteredOrigin(origin: string): boolean {
    return (
      this.db
        .query<{ one: number }, [string]>(
          `SELECT 1 AS one FROM apps, json_each(apps.origins_json) AS o
           WHERE apps.disabled_at IS NULL AND o.value = ? LIMIT 1`,
        )
        .get(origin) !== null
    );
  }

  /** Adds a new key; earlier keys stay valid until revoked (rotation). */
  issueKey(appId: string, now: number): IssuedKey {
    const keyId = `key${randomString(13, LOWER_ALNUM)}`;
    const secret = generateSecret();
    this.db
      .query("INSERT INTO app_keys (id, app_id, secret_hash, created_at) VALUES (?, ?, ?, ?)")
      .run(keyId, appId, hashSecret(secret), now);
    return { keyId, secretKey: formatSecretKey(appId, secret) };
  }

  /** Revokes one key; returns false when no such active key exists for the app. */
  revokeKey(appId: string, keyId: string, now: number): boolean {
    const result = this.db
      .query("UPDATE app_keys SET revoked_at = ? WHERE id = ? AND app_id = ? AND revoked_at IS NULL")
      .run(now, keyId, appId);
    return result.changes === 1;
  }

  activeKeysOf(appId: string): AppKey[] {
    return this.activeKeys.all(appId).map(toKey);
  }

  keysOf(appId: string): AppKey[] {
    return this.db
      .query<KeyRow, [string]>("SELECT * FROM app_keys WHERE app_id = ? ORDER BY created_at, id")
      .all(appId)
      .map(toKey);
  }
}
