/**
 * Service tiers and Anthropic's fast mode, priced. A request's `service_tier` (shared spec:
 * ChatRequest.service_tier; `fast` is its alias for `priority`) and the body field `speed:
 * "fast"` (Anthropic's fast mode, premium-priced) are billed at the tier's rate, which the
 * catalogue (GET /models) does not list. The operator gives each rate as a multiplier of the
 * listed prices (SERVICE_TIER_PRICE_MULTIPLIERS); a tier without one cannot be bounded and is
 * refused with 400 before anything is reserved.
 */
import { ApiError } from "../errors";
import type { ModelPrice } from "./model-price";

/** The keys SERVICE_TIER_PRICE_MULTIPLIERS takes: service tiers, and `fast` for `speed: "fast"`. */
export const PRICED_TIER_KEYS = ["auto", "default", "flex", "priority", "scale", "fast"] as const;

/** Multipliers of the listed prices, by key of PRICED_TIER_KEYS. */
export type TierMultipliers = ReadonlyMap<string, number>;

/**
 * Tiers billed at the listed price or below: the standard tier (OpenAI's `default`, Google's
 * and Anthropic's `standard`), and `flex`, which is cheaper and, where the provider serves it
 * on the standard tier instead, billed at the standard rate (OpenRouter's service tiers guide).
 */
const LISTED_PRICE_TIERS = new Set(["default", "standard", "flex"]);

const SETTING_HINT = "an operator can price it with SERVICE_TIER_PRICE_MULTIPLIERS (multipliers of the listed prices, e.g. priority=2,fast=6)";

/**
 * The multiplier of the listed prices this request is billed at: its service tier's times its
 * speed's (both premium modes may apply together, so the product bounds either). Throws 400
 * `invalid_request` for a tier or speed whose rate is not known.
 */
export function tierPriceMultiplier(body: Record<string, unknown>, configured: TierMultipliers): number {
  return serviceTierMultiplier(body.service_tier, configured) * speedMultiplier(body.speed, configured);
}

function serviceTierMultiplier(tier: unknown, configured: TierMultipliers): number {
  if (tier === undefined || tier === null) return configured.get("default") ?? 1;
  if (typeof tier !== "string") throw new ApiError("invalid_request", "service_tier must be a string");
  if (LISTED_PRICE_TIERS.has(tier)) return configured.get(tier === "standard" ? "default" : tier) ?? 1;
  // The spec: `fast` is accepted as an alias for `priority`.
  const key = tier === "fast" ? "priority" : tier;
  if (key === "auto") {
    // `auto` lets the provider choose, and it may choose priority (OpenAI's `auto` runs on the
    // tier its project is set to): price it as the dearer of what is set for auto and priority.
    const rates = [configured.get("auto"), configured.get("priority")].filter((rate): rate is number => rate !== undefined);
    if (rates.length > 0) return Math.max(...rates);
  } else {
    const rate = configured.get(key);
    if (rate !== undefined) return rate;
  }
  throw new ApiError(
    "invalid_request",
    `service_tier ${JSON.stringify(tier)} is billed at a rate the upstream's catalogue does not list, so its cost cannot be bounded; ${SETTING_HINT}`,
  );
}

function speedMultiplier(speed: unknown, configured: TierMultipliers): number {
  if (speed === undefined || speed === null || speed === "standard") return 1;
  const rate = speed === "fast" ? configured.get("fast") : undefined;
  if (rate !== undefined) return rate;
  throw new ApiError(
    "invalid_request",
    `speed ${JSON.stringify(speed)} is billed at a premium rate the upstream's catalogue does not list, so its cost cannot be bounded; ${SETTING_HINT}`,
  );
}

/** Every price of a model times `multiplier` (a tier multiplies what the provider bills, not only tokens). */
export function atTierPrices(model: ModelPrice, multiplier: number): ModelPrice {
  if (multiplier === 1) return model;
  return {
    ...model,
    prompt: model.prompt * multiplier,
    completion: model.completion * multiplier,
    request: model.request * multiplier,
    image: model.image * multiplier,
    webSearch: model.webSearch * multiplier,
    internalReasoning: model.internalReasoning * multiplier,
    cacheWrite: model.cacheWrite * multiplier,
    audio: model.audio * multiplier,
    audioOutput: model.audioOutput * multiplier,
    imageToken: model.imageToken * multiplier,
    imageOutput: model.imageOutput * multiplier,
  };
}
