import type { Database } from "bun:sqlite";
import type { SettingsRepository } from "../settings";
import { scrubbingWrite } from "./database";
import { KEY_CHECK_SETTING } from "../stored-secrets";

/** The store's key check, for a write that seals a new value (src/store/key-fence.ts): call it inside that write's IMMEDIATE transaction. */
export const sqliteKeyCheck = (db: Database): string | null =>
  db.query<{ value: string }, [string]>("SELECT value FROM settings WHERE key = ?").get(KEY_CHECK_SETTING)?.value ?? null;

export class SqliteSettingsRepository implements SettingsRepository {
  constructor(private readonly db: Database) {}

  async get(key: string): Promise<string | null> {
    return this.db.query<{ value: string }, [string]>("SELECT value FROM settings WHERE key = ?").get(key)?.value ?? null;
  }

  async getOrCreate(key: string, make: () => string): Promise<string> {
    await this.claim(key, make());
    return (await this.get(key))!;
  }

  async claim(key: string, value: string): Promise<boolean> {
    return this.db.query("INSERT OR IGNORE INTO settings (key, value) VALUES (?, ?)").run(key, value).changes === 1;
  }

  /** The value replaced does not stay in the file (scrubbingWrite): it may be a secret in clear. */
  async replace(key: string, expected: string, value: string): Promise<boolean> {
    return scrubbingWrite(this.db, () => this.db.query("UPDATE settings SET value = ? WHERE key = ? AND value = ?").run(value, key, expected).changes === 1);
  }

  async delete(key: string, expected: string): Promise<boolean> {
    return scrubbingWrite(this.db, () => this.db.query("DELETE FROM settings WHERE key = ? AND value = ?").run(key, expected).changes === 1);
  }
}
