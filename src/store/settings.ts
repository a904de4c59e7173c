import type { Database } from "bun:sqlite";

/** Small key/value settings the service keeps for itself (e.g. a generated JWT secret). */
export class SettingsRepository {
  constructor(private readonly db: Database) {}

  get(key: string): string | null {
    return this.db.query<{ value: string }, [string]>("SELECT value FROM settings WHERE key = ?").get(key)?.value ?? null;
  }

  /** Stores `make()` under `key` unless a value is already there; returns the stored one. */
  getOrCreate(key: string, make: () => string): string {
    this.db.query("INSERT OR IGNORE INTO settings (key, value) VALUES (?, ?)").run(key, make());
    return this.get(key)!;
  }
}
