/**
 * Tells this process that rows it may have cached changed elsewhere (another instance, the
 * CLI). `live` is false while changes could be missed: the cache is bypassed then. Each engine
 * builds its own (src/store/sqlite/change-feed.ts, src/store/postgres/change-feed.ts).
 */
export interface ChangeFeed {
  readonly live: boolean;
  /** Called before every cached read: a feed that can look for changes cheaply does so here. */
  poll?(): void;
  /** `key` names the cached entries: `apps <appId>` or `connections <appId> <appUserId>`; null: anything may have changed. */
  subscribe(listener: (key: string | null) => void): void;
  close(): Promise<void>;
}
