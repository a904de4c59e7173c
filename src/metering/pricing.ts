import type { Logger } from "../logger";
import type { UpstreamClient } from "../upstream/client";

/** What the proxy needs to know about a model to reserve and charge for it. */
export interface ModelPrice {
  /** Nano-dollars per token; may be fractional (e.g. $0.0375/M tokens = 37.5). */
  promptNanoPerToken: number;
  completionNanoPerToken: number;
  contextLength: number;
  /** The most completion tokens the model (its top provider) will produce. */
  maxCompletionTokens: number;
  /** False when the fallback price was used because the catalogue does not list it. */
  listed: boolean;
}

export interface FallbackPricing {
  promptUsdPerToken: number;
  completionUsdPerToken: number;
  contextTokens: number;
}

interface CatalogueModel {
  id?: unknown;
  context_length?: unknown;
  pricing?: { prompt?: unknown; completion?: unknown };
  top_provider?: { max_completion_tokens?: unknown; context_length?: unknown };
}

/**
 * Prices per model from the upstream's `GET /models` (OpenRouter: `pricing.prompt` and
 * `pricing.completion` are decimal strings in USD per token). Fetched at start and
 * refreshed periodically; a failed refresh keeps the last good catalogue.
 */
export class PricingCatalogue {
  private models = new Map<string, ModelPrice>();
  private lastRefreshAt: number | null = null;
  private timer: ReturnType<typeof setInterval> | null = null;

  constructor(
    private readonly upstream: UpstreamClient,
    private readonly fallback: FallbackPricing,
    private readonly logger: Logger,
  ) {}

  priceOf(model: string): ModelPrice {
    return (
      this.models.get(model) ?? {
        promptNanoPerToken: this.fallback.promptUsdPerToken * 1e9,
        completionNanoPerToken: this.fallback.completionUsdPerToken * 1e9,
        contextLength: this.fallback.contextTokens,
        maxCompletionTokens: this.fallback.contextTokens,
        listed: false,
      }
    );
  }

  get size(): number {
    return this.models.size;
  }

  get refreshedAt(): number | null {
    return this.lastRefreshAt;
  }

  async refresh(): Promise<void> {
    try {
      const response = await this.upstream.get("/models");
      if (!response.ok) throw new Error(`GET /models answered ${response.status}`);
      const body = (await response.json()) as { data?: CatalogueModel[] };
      const next = new Map<string, ModelPrice>();
      for (const m of body.data ?? []) {
        const parsed = parseModel(m);
        if (parsed) next.set(parsed.id, parsed.price);
      }
      if (next.size === 0) throw new Error("GET /models listed no priced models");
      this.models = next;
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

function parseModel(m: CatalogueModel): { id: string; price: ModelPrice } | null {
  if (typeof m.id !== "string") return null;
  const prompt = Number(m.pricing?.prompt);
  const completion = Number(m.pricing?.completion);
  // OpenRouter marks variable-priced routers with "-1": they cannot be reserved exactly, so
  // leave them out and let the (high) fallback price apply.
  if (!Number.isFinite(prompt) || !Number.isFinite(completion) || prompt < 0 || completion < 0) return null;
  const contextLength = positiveInt(m.context_length) ?? positiveInt(m.top_provider?.context_length) ?? 4096;
  const maxCompletion = positiveInt(m.top_provider?.max_completion_tokens) ?? contextLength;
  return {
    id: m.id,
    price: {
      promptNanoPerToken: prompt * 1e9,
      completionNanoPerToken: completion * 1e9,
      contextLength,
      maxCompletionTokens: Math.min(maxCompletion, contextLength),
      listed: true,
    },
  };
}

function positiveInt(v: unknown): number | null {
  return typeof v === "number" && Number.isInteger(v) && v > 0 ? v : null;
}
