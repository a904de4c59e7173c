import { LOWER_ALNUM, randomString } from "../random";
import type { FundingSource } from "./connections";

export interface App {
  id: string;
  name: string;
  origins: string[];
  createdAt: number;
  disabledAt: number | null;
  /** Largest one-time grant this app may ask for; null: the service default. */
  maxGrantNano: number | null;
  /** Most grant dollars this app may have approved in one UTC day; null: the service default. */
  grantDailyCeilingNano: number | null;
  /** Who may pay its users' calls, as the users choose: never empty; `["app"]` unless the operator said otherwise. */
  fundingSources: FundingSource[];
}

export interface AppKey {
  id: string;
  appId: string;
  secretHash: Uint8Array;
  createdAt: number;
  revokedAt: number | null;
}

/**
 * A new secret key as the store receives it: its id and the SHA-256 of its secret part,
 * never the secret. Keys are minted by the operator service (src/services/operator/secret-keys.ts).
 */
export interface NewAppKey {
  id: string;
  secretHash: Uint8Array;
}

/** An app's own grant limits; null (or absent at creation): the service default. */
export interface AppGrantLimits {
  maxGrantNano?: number | null;
  grantDailyCeilingNano?: number | null;
}

/** What an app may set beside its name and origins; absent at creation: the default. */
export interface AppSettings extends AppGrantLimits {
  /** Non-empty, checked by the operator service. */
  fundingSources?: FundingSource[];
}

/** Absent fields are kept; a null limit goes back to the service default. */
export interface AppChanges extends AppSettings {
  name?: string;
  origins?: string[];
}

/** The funding sources of an app created without any: the operator's key pays, as before users could pay. */
export const DEFAULT_FUNDING_SOURCES: readonly FundingSource[] = ["app"];

/** Apps and their secret keys (several per app, so keys can be rotated without downtime). */
export interface AppRepository {
  /** A new app with its first key, in one transaction. */
  create(name: string, origins: string[], now: number, firstKey: NewAppKey, settings?: AppSettings): Promise<App>;
  find(id: string): Promise<App | null>;
  /** Changes the given fields (origins are replaced as a whole); null when there is no such app. */
  update(id: string, changes: AppChanges): Promise<App | null>;
  /** Disables (`at` a time) or enables (`null`) an app; false when there is no such app. */
  setDisabled(id: string, at: number | null): Promise<boolean>;
  list(): Promise<App[]>;
  count(): Promise<number>;
  /** True when some active app registered this origin (used to answer CORS preflights). */
  isRegisteredOrigin(origin: string): Promise<boolean>;
  /** Adds a new key; earlier keys stay valid until revoked (rotation). */
  addKey(appId: string, key: NewAppKey, now: number): Promise<void>;
  /** Revokes one key; returns false when no such active key exists for the app. */
  revokeKey(appId: string, keyId: string, now: number): Promise<boolean>;
  activeKeysOf(appId: string): Promise<AppKey[]>;
  keysOf(appId: string): Promise<AppKey[]>;
}

/** App ids never contain "_" so that `sk_live_{appId}_{secret}` splits unambiguously. */
export const newAppId = () => `app${randomString(13, LOWER_ALNUM)}`;
