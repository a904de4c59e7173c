import type { Logger } from "../logger";
import { fallbackPrice, parseModelPrice, type CatalogueEntry, type ModelPrice } from "./model-price";

export type { ModelPrice } from "./model-price";

/**
 * Fetches the upstream's model list (`GET /models`): its entries as listed, unchecked. It
 * throws when the upstream gives none (an error status, a body that is not JSON).
 */
export type ListModels = () => Promise<unknown[]>;

export interface FallbackPricing {
  promptUsdPerToken: number;
  completionUsdPerToken: number;
  contextTokens: number;
}

/**
 * Model-id suffixes OpenRouter accepts on any model: `:online` adds the web plugin,
 * `:nitro`/`:floor`/`:exacto` sort providers, `:thinking`/`:extended` are variants.
 * `:free` models are listed under their own id, so they are found before this applies.
 */
const VARIANT_SUFFIXES = new Set(["online", "nitro", "floor", "exacto", "thinking", "extended"]);

/**
 * While the listing cannot be loaded (none yet, or the last load failed) it is asked for
 * again this often, not every PRICING_REFRESH_SECONDS: until it loads, every call is
 * bounded as the worst case (./worst-case.ts), so a recovered upstream should end that soon.
 */
export const FAILED_LOAD_RETRY_MS = 5_000;

/** A listing older than this many refresh intervals is stale even if no load failed (`/readyz` says the same). */
export const STALE_AFTER_INTERVALS = 3;

/** Wall time and timers of the refresh beat: the process's own, or a test's fake clock. */
export interface RefreshTimers {
  now(): number;
  setTimeout(run: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const systemTimers: RefreshTimers = {
  now: () => Date.now(),
  setTimeout: (run, ms) => {
    const timer = setTimeout(run, ms);
    // Background work never keeps a process alive by itself.
    timer.unref?.();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** A model id as the client sent it, resolved to the catalogue entry that prices it. */
export interface ResolvedModel {
  price: ModelPrice;
  /** The `:online` suffix: the web plugin runs with its default results. */
  online: boolean;
}

/**
 * Prices per model from the upstream's `GET /models` (every billed dimension, see
 * ./model-price.ts), fetched at start and refreshed periodically; a failed refresh keeps
 * the last good catalogue, and is tried again every FAILED_LOAD_RETRY_MS until a load
 * succeeds. The raw entries are kept too, for `GET /api/v1/models`.
 */
export class PricingCatalogue {
  private models = new Map<string, ModelPrice>();
  private entries: unknown[] = [];
  private lastRefreshAt: number | null = null;
  private lastLoadFailed = false;
  private loading: Promise<void> | null = null;
  private refreshMs: number | null = null;
  private timer: unknown = null;

  constructor(
    private readonly listModels: ListModels,
    private readonly fallback: FallbackPricing,
    private readonly logger: Logger,
    private readonly timers: RefreshTimers = systemTimers,
  ) {}

  /**
   * The price of a model id. With a loaded catalogue an unknown id is null (the caller
   * answers 400); before the first load, the deliberately high fallback price stands in.
   */
  resolve(modelId: string): ResolvedModel | null {
    const exact = this.models.get(modelId);
    if (exact) return { price: exact, online: false };
    const colon = modelId.lastIndexOf(":");
    if (colon > 0 && VARIANT_SUFFIXES.has(modelId.slice(colon + 1))) {
      const base = this.models.get(modelId.slice(0, colon));
      if (base) return { price: base, online: modelId.endsWith(":online") };
    }
    if (this.models.size > 0) return null;
    const f = this.fallback;
    return { price: fallbackPrice(modelId, f.promptUsdPerToken, f.completionUsdPerToken, f.contextTokens), online: modelId.endsWith(":online") };
  }

  /** Fixed-priced models whose prompt and completion prices are at or under the given ones (nano per token). */
  modelsWithin(promptNano: number, completionNano: number): ModelPrice[] {
    const out: ModelPrice[] = [];
    for (const price of this.models.values()) {
      if (!price.variable && price.prompt <= promptNano && price.completion <= completionNano) out.push(price);
    }
    return out;
  }

  /** The catalogue's entries as the upstream listed them (OpenRouter's Model objects). */
  get listing(): readonly unknown[] {
    return this.entries;
  }

  get size(): number {
    return this.models.size;
  }

  get refreshedAt(): number | null {
    return this.lastRefreshAt;
  }

  /** Milliseconds since the last successful load, on the clock that stamped it; null before any. */
  get ageMs(): number | null {
    return this.lastRefreshAt === null ? null : this.timers.now() - this.lastRefreshAt;
  }

  /**
   * Whether the listing in hand is the upstream's current one: loaded, its last load
   * succeeded, and (once the beat runs) not older than STALE_AFTER_INTERVALS refresh
   * intervals. Only a fresh listing is trusted to say which models do not reason; while
   * it is empty or stale, every model is bounded as one that reasons.
   */
  get fresh(): boolean {
    const age = this.ageMs;
    if (this.models.size === 0 || this.lastLoadFailed || age === null) return false;
    return this.refreshMs === null || age <= STALE_AFTER_INTERVALS * this.refreshMs;
  }

  /** Loads the listing now; a load asked for while one is under way joins it. */
  refresh(): Promise<void> {
    this.loading ??= this.load().finally(() => (this.loading = null));
    return this.loading;
  }

  private async load(): Promise<void> {
    try {
      const entries = await this.listModels();
      const next = new Map<string, ModelPrice>();
      for (const entry of entries) {
        const price = entry && typeof entry === "object" ? parseModelPrice(entry as CatalogueEntry) : null;
        if (price) next.set(price.id, price);
      }
      if (next.size === 0) throw new Error("GET /models listed no priced models");
      this.models = next;
      this.entries = entries;
      this.lastRefreshAt = this.timers.now();
      this.lastLoadFailed = false;
      this.logger.info("pricing catalogue loaded", { models: next.size });
    } catch (err) {
      const fields = { error: err instanceof Error ? err.message : String(err), models: this.models.size };
      // At warn once per outage: while it lasts, the load is retried every few seconds.
      if (this.lastLoadFailed) this.logger.debug("pricing catalogue refresh failed again", fields);
      else this.logger.warn("pricing catalogue refresh failed; keeping the previous one", fields);
      this.lastLoadFailed = true;
    }
  }

  /** Refreshes every `refreshSeconds`, or every FAILED_LOAD_RETRY_MS while the last load failed. */
  start(refreshSeconds: number): void {
    if (this.timer !== null) return;
    this.refreshMs = refreshSeconds * 1000;
    this.scheduleNext();
  }

  stop(): void {
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
  }

  private scheduleNext(): void {
    const refreshMs = this.refreshMs!;
    const delay = this.models.size > 0 && !this.lastLoadFailed ? refreshMs : Math.min(FAILED_LOAD_RETRY_MS, refreshMs);
    const beat = this.timers.setTimeout(() => {
      void this.refresh().then(() => {
        // Stopped (or started anew) while loading: this beat ends here.
        if (this.timer === beat) this.scheduleNext();
      });
    }, delay);
    this.timer = beat;
  }
}
