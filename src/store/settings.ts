/** Small key/value settings the service keeps for itself (e.g. a generated JWT secret, sealed: src/store/stored-secrets.ts). */
export interface SettingsRepository {
  get(key: string): Promise<string | null>;
  /** Stores `make()` under `key` unless a value is already there; returns the stored one. */
  getOrCreate(key: string, make: () => string): Promise<string>;
  /** Stores `value` under `key` if nothing is there; true for the one caller that stored it. */
  claim(key: string, value: string): Promise<boolean>;
  /** Replaces the value under `key` only while it is still `expected` (compare and set); true when it did. */
  replace(key: string, expected: string, value: string): Promise<boolean>;
  /** Deletes `key` only while its value is still `expected`; true when it did. */
  delete(key: string, expected: string): Promise<boolean>;
}
