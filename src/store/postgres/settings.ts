import type { ReservedSQL, SQL } from "bun";
import type { SettingsRepository } from "../settings";
import type { PostgresDatabase } from "./database";
import { KEY_CHECK_SETTING } from "../stored-secrets";

/**
 * The store's key check, for a write that seals a new value (src/store/key-fence.ts), inside
 * that write's transaction: FOR SHARE, so a rotation's update of the check waits for the
 * write to commit, and its pass over the sealed values then sees (and re-seals) it.
 */
export async function postgresKeyCheck(tx: SQL | ReservedSQL): Promise<string | null> {
  const [row] = await tx`SELECT value FROM settings WHERE key = ${KEY_CHECK_SETTING} FOR SHARE`;
  return row ? String(row.value) : null;
}

export class PostgresSettingsRepository implements SettingsRepository {
  constructor(private readonly db: PostgresDatabase) {}

  async get(key: string): Promise<string | null> {
    const [row] = await this.db.run((sql) => sql`SELECT value FROM settings WHERE key = ${key}`);
    return row ? String(row.value) : null;
  }

  /** Several instances starting at once all get the value the first one stored. */
  async getOrCreate(key: string, make: () => string): Promise<string> {
    await this.claim(key, make());
    return (await this.get(key))!;
  }

  async claim(key: string, value: string): Promise<boolean> {
    const rows = await this.db.run((sql) => sql`INSERT INTO settings (key, value) VALUES (${key}, ${value}) ON CONFLICT (key) DO NOTHING RETURNING key`);
    return rows.length === 1;
  }

  async replace(key: string, expected: string, value: string): Promise<boolean> {
    const rows = await this.db.run((sql) => sql`UPDATE settings SET value = ${value} WHERE key = ${key} AND value = ${expected} RETURNING key`);
    return rows.length === 1;
  }

  async delete(key: string, expected: string): Promise<boolean> {
    const rows = await this.db.run((sql) => sql`DELETE FROM settings WHERE key = ${key} AND value = ${expected} RETURNING key`);
    return rows.length === 1;
  }
}
