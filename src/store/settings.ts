/** Small key/value settings the service keeps for itself (e.g. a generated JWT secret). */
export interface SettingsRepository {
  get(key: string): Promise<string | null>;
  /** Stores `make()` under `key` unless a value is already there; returns the stored one. */
  getOrCreate(key: string, make: () => string): Promise<string>;
  /** Stores `value` under `key` if nothing is there; true for the one caller that stored it. */
  claim(key: string, value: string): Promise<boolean>;
}
