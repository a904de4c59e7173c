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

/** A model id as the client sent it, resolved to the catalogue entry that prices it. */
export interface ResolvedModel {
  price: ModelPrice;
  /** The `:online` suffix: the web plugin runs with its default results. */
  online: boolean;
}

/**
 * Prices per model from the upstream's `GET /models` (every billed dimension, see
 * ./model-price.ts), fetched at start and refreshed periodically; a failed refresh keeps
 * the last good catalogue. The raw entries are kept too, for `GET /api/v1/models`.
 */
export class PricingCatalogue {
  private models = new Map<string, ModelPrice>();
  private entries: unknown[] = [];
  private lastRefreshAt: number | null = null;
  private timer: ReturnType<typeof setInterval> | null = null;

  constructor(
    private readonly listModels: ListModels,
    private readonly fallback: FallbackPricing,
    private readonly logger: Logger,
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

  async refresh(): Promise<void> {
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
      this.lastRefreshAt = Date.now();
      this.logger.info("pricing catalogue loaded", { models: next.size });
    } catch (err) {
      this.logger.warn("pricing catalogue refresh failed; keeping the previous one", {
        error: err instanceof Error ? err.message : String(err),
        models: this.models.size,
      });
    }
  }

  start(refreshSeconds: number): void {
    this.timer = setInterval(() => void this.refresh(), refreshSeconds * 1000);
    this.timer.unref?.();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
