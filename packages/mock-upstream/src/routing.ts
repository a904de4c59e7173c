/**
 * Who serves a request: the first available candidate model (`model`, then the `models`
 * fallbacks) that has a provider within `provider.max_price`, a "-1" router resolved to the
 * first model it routes to that fits. Among a model's providers the mock takes the PRICIEST
 * one that fits: OpenRouter prefers cheap providers but does not promise it, and a spend cap
 * must hold whichever provider serves.
 */
import { splitOnline, type MaxPrice } from "./chat-request";
import { isVariableRouter, type MockModel, type MockProvider } from "./models";

export interface Route {
  /** The model that serves (never a router): the response's `model`, billed at its prices. */
  model: MockModel;
  provider: string;
  /** The provider's prices are the listed ones times this. */
  multiplier: number;
  /** The candidate id was `…:online` (web search). */
  online: boolean;
  /** The provider stops billing when a stream is aborted (MockProvider.cancellable). */
  cancellable: boolean;
  /** The "-1" router the request named (the generation record's `router`); null when none. */
  router: string | null;
}

export type RouteResult = { route: Route } | { status: 404; message: string };

/** A model without `providers` has one, at the listed prices. */
const IMPLICIT_PROVIDER: MockProvider = { name: "Mock", priceMultiplier: 1, cancellable: false };

/** The catalogue model for a candidate id (a `:online` suffix names the same model). */
export function findModel(models: readonly MockModel[], candidate: string): MockModel | undefined {
  const { id } = splitOnline(candidate);
  return models.find((m) => m.id === id);
}

/** `a <= b` up to float noise: 0.000001 × 1e6 must fit under a max_price of 1. */
function notAbove(a: number, b: number): boolean {
  return a <= b + Math.abs(b) * 1e-9;
}

/** Every max_price dimension given holds at the provider's prices (ProviderPreferences.max_price). */
function fitsMaxPrice(model: MockModel, multiplier: number, max: MaxPrice | null): boolean {
  if (max === null) return true;
  const price = (value: string | undefined) => Number(value ?? "0") * multiplier;
  const perMillion = 1_000_000;
  if (max.prompt !== undefined && !notAbove(price(model.pricing.prompt) * perMillion, max.prompt)) return false;
  if (max.completion !== undefined && !notAbove(price(model.pricing.completion) * perMillion, max.completion)) return false;
  if (max.request !== undefined && !notAbove(price(model.pricing.request), max.request)) return false;
  if (max.image !== undefined && !notAbove(price(model.pricing.image), max.image)) return false;
  return true;
}

/** The priciest provider of a (non-router) model within max_price; the first listed wins a tie. */
function pickProvider(model: MockModel, max: MaxPrice | null): MockProvider | null {
  const providers = model.providers ?? [IMPLICIT_PROVIDER];
  let best: MockProvider | null = null;
  for (const provider of providers) {
    if (!fitsMaxPrice(model, provider.priceMultiplier, max)) continue;
    if (best === null || provider.priceMultiplier > best.priceMultiplier) best = provider;
  }
  return best;
}

function serve(models: readonly MockModel[], candidate: string, max: MaxPrice | null): Route | null {
  const model = findModel(models, candidate);
  if (!model) return null;
  const { online } = splitOnline(candidate);
  if (isVariableRouter(model)) {
    // A router serves through the first model it routes to that fits; never through another router.
    for (const target of model.routesTo ?? []) {
      const routed = models.find((m) => m.id === target);
      if (!routed || isVariableRouter(routed)) continue;
      const provider = pickProvider(routed, max);
      if (provider) return routeThrough(routed, provider, online, model.id);
    }
    return null;
  }
  const provider = pickProvider(model, max);
  return provider ? routeThrough(model, provider, online, null) : null;
}

function routeThrough(model: MockModel, provider: MockProvider, online: boolean, router: string | null): Route {
  return { model, provider: provider.name, multiplier: provider.priceMultiplier, online, cancellable: provider.cancellable === true, router };
}

/**
 * The route for a request whose candidates all exist in the catalogue. The first `failOver`
 * candidates are down (scenario `fail_over=N`); nothing left that can serve is a 404.
 */
export function routeRequest(models: readonly MockModel[], candidates: readonly string[], failOver: number, max: MaxPrice | null): RouteResult {
  for (const candidate of candidates.slice(failOver)) {
    const route = serve(models, candidate, max);
    if (route) return { route };
  }
  // Candidates were left and none fit: the price limit is why.
  if (max !== null && candidates.length > failOver) {
    return { status: 404, message: "No endpoints found matching your max price. Raise provider.max_price or allow other models." };
  }
  // OpenRouter's words when no provider of a model is available.
  return { status: 404, message: `No endpoints found for ${candidates[candidates.length - 1]}.` };
}
