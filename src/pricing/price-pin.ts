/**
 * `provider.max_price` (shared spec: ProviderPreferences.max_price): prompt and completion
 * in USD per million tokens, request in USD per request, image in USD per image, sent as
 * decimal strings. Pinning the prices a reservation was made on makes the upstream itself
 * refuse a pricier provider or routed model, instead of billing past the reservation.
 */
import { ApiError } from "../errors";

/** The pinned prices, in nano-dollars per unit (per token for prompt and completion). */
export interface PricePin {
  prompt: number;
  completion: number;
  request: number;
  image: number;
}

const DIMENSIONS = ["prompt", "completion", "request", "image"] as const;

/** Nano-dollars per unit → the wire's USD unit: per million tokens for the token prices. */
const WIRE_SCALE: Record<(typeof DIMENSIONS)[number], number> = { prompt: 1e-3, completion: 1e-3, request: 1e-9, image: 1e-9 };

/** The client's own `provider.max_price`, in nano-dollars per unit; absent dimensions are Infinity. */
export function clientPin(body: Record<string, unknown>): PricePin {
  const provider = body.provider;
  if (provider !== undefined && provider !== null && (typeof provider !== "object" || Array.isArray(provider))) {
    throw new ApiError("invalid_request", "provider must be an object");
  }
  const maxPrice = (provider as { max_price?: unknown } | undefined)?.max_price;
  const pin: PricePin = { prompt: Infinity, completion: Infinity, request: Infinity, image: Infinity };
  if (maxPrice === undefined || maxPrice === null) return pin;
  if (typeof maxPrice !== "object" || Array.isArray(maxPrice)) throw new ApiError("invalid_request", "provider.max_price must be an object");
  for (const dimension of DIMENSIONS) {
    const raw = (maxPrice as Record<string, unknown>)[dimension];
    if (raw === undefined || raw === null) continue;
    const usd = Number(raw);
    if ((typeof raw !== "number" && typeof raw !== "string") || !Number.isFinite(usd) || usd < 0) {
      throw new ApiError("invalid_request", `provider.max_price.${dimension} must be a non-negative number`);
    }
    pin[dimension] = usd / WIRE_SCALE[dimension];
  }
  return pin;
}

/**
 * The body's `provider` with `max_price` set to `pin` (already the lower of ours and the
 * client's), keeping the client's other routing preferences and any dimension we do not pin.
 */
export function withPricePin(provider: unknown, pin: PricePin): Record<string, unknown> {
  const base = provider && typeof provider === "object" ? (provider as Record<string, unknown>) : {};
  const maxPrice: Record<string, unknown> = { ...(base.max_price as Record<string, unknown> | undefined) };
  for (const dimension of DIMENSIONS) maxPrice[dimension] = decimal(pin[dimension] * WIRE_SCALE[dimension]);
  return { ...base, max_price: maxPrice };
}

/**
 * A plain decimal string (no exponent): catalogue prices have at most about 10 decimals.
 * Memoised: a process sees a few dozen distinct prices, and every chat call pins several
 * (toFixed and two regular expressions were 2 % of the service's CPU, ARCHITECTURE.md §7
 * "Per-call strings and writes").
 */
function decimal(usd: number): string {
  let text = DECIMALS.get(usd);
  if (text === undefined) {
    const fixed = usd.toFixed(12);
    text = fixed.includes(".") ? fixed.replace(/0+$/, "").replace(/\.$/, "") : fixed;
    if (DECIMALS.size >= 10_000) DECIMALS.clear();
    DECIMALS.set(usd, text);
  }
  return text;
}
const DECIMALS = new Map<number, string>();
