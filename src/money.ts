/**
 * Money and periods (ARCHITECTURE.md §3 "Money").
 * Internally every amount is an integer count of nano-dollars (1e-9 USD). JS numbers hold
 * integers exactly up to 2^53 nano-dollars (about $9 million), far above any cap here.
 */
export const NANO_PER_USD = 1_000_000_000;

/** USD → nano-dollars, rounded up: a cost is never under-counted. */
export function usdToNanoCeil(usd: number): number {
  // Scale first, then trim float noise (0.1 * 1e9 = 100000000.00000001) before ceil.
  const scaled = usd * NANO_PER_USD;
  const rounded = Math.round(scaled);
  return Math.abs(scaled - rounded) < 1e-6 ? rounded : Math.ceil(scaled);
}

/** USD → nano-dollars, rounded down: a cap is never over-stated. */
export function usdToNanoFloor(usd: number): number {
  const scaled = usd * NANO_PER_USD;
  const rounded = Math.round(scaled);
  return Math.abs(scaled - rounded) < 1e-6 ? rounded : Math.floor(scaled);
}

/**
 * How a dollar amount someone typed (a cap, a limit, a reservation) becomes nano-dollars.
 * `floor` for a cap or limit (never over-stated), `ceil` for what is reserved or charged
 * (never under-counted). `zeroAllowed` where 0 means something ("reserve nothing");
 * elsewhere 0 would switch the thing off, so it must be > 0.
 */
export interface UsdAmountRule {
  rounding: "floor" | "ceil";
  zeroAllowed?: boolean;
}

/** The smallest amount counted: one nano-dollar. Below it nothing can be represented. */
export const ONE_NANO_USD = "0.000000001";

/** The largest whole-dollar amount whose nano-dollars JS numbers hold exactly (2^53 - 1 nano, about $9 million). */
export const MAX_EXACT_USD = Math.floor(Number.MAX_SAFE_INTEGER / NANO_PER_USD);

/**
 * Why `usd` cannot be taken as an amount under `rule`, worded to follow the field's name
 * ("monthlyUsd must be ..."); null when it can. A positive amount below one nano-dollar
 * is refused even where it would round up: it is not an amount the service can count,
 * and where it rounds down it would be stored as 0 (a cap of 0 turns the thing off).
 */
export function usdAmountProblem(usd: number, rule: UsdAmountRule): string | null {
  if (!Number.isFinite(usd) || usd < 0 || (usd === 0 && !rule.zeroAllowed)) return rule.zeroAllowed ? "must be a number >= 0" : "must be a number > 0";
  if (usd > 0 && usdToNanoFloor(usd) < 1) return `must be at least ${ONE_NANO_USD} (one nano-dollar, the smallest amount the service counts)`;
  if (usd > MAX_EXACT_USD) return `must be at most ${MAX_EXACT_USD} (the largest amount the service counts exactly)`;
  return null;
}

/**
 * Converts a dollar amount from outside (API body, query, CLI flag, environment) to
 * nano-dollars, or throws what `refuse` makes of the problem: every surface checks money
 * by this one rule and words the refusal its own way.
 */
export function usdAmountToNano(usd: number, rule: UsdAmountRule, refuse: (problem: string) => Error): number {
  const problem = usdAmountProblem(usd, rule);
  if (problem !== null) throw refuse(problem);
  return rule.rounding === "floor" ? usdToNanoFloor(usd) : usdToNanoCeil(usd);
}

/** Nano-dollars → USD for the API boundary. */
export function nanoToUsd(nano: number): number {
  return nano / NANO_PER_USD;
}

/** A billing period: one UTC calendar month, named `YYYY-MM`. */
export interface Period {
  id: string;
  /** ISO 8601, inclusive. */
  start: string;
  /** ISO 8601, exclusive: the instant usage resets. */
  end: string;
}

/** The last period asked for, and its bounds in ms: every call lands in the same month but once a month. */
let lastPeriod: { startMs: number; endMs: number; period: Period } | null = null;

export function periodAt(ms: number): Period {
  // Every chat call asks (its budget's account is per period): two ISO strings each time
  // were 1 % of the service's CPU (ARCHITECTURE.md §7 "Period remembered"). The period is
  // frozen, so sharing it is safe.
  if (lastPeriod && ms >= lastPeriod.startMs && ms < lastPeriod.endMs) return lastPeriod.period;
  const d = new Date(ms);
  const year = d.getUTCFullYear();
  const month = d.getUTCMonth();
  const startMs = Date.UTC(year, month, 1);
  const endMs = Date.UTC(year, month + 1, 1);
  const period: Period = Object.freeze({
    id: `${year}-${String(month + 1).padStart(2, "0")}`,
    start: new Date(startMs).toISOString(),
    end: new Date(endMs).toISOString(),
  });
  lastPeriod = { startMs, endMs, period };
  return period;
}

/** Parses `YYYY-MM` into a Period, or returns null when it is not one (month 00 or 13, say). */
export function parsePeriod(id: string): Period | null {
  const start = /^\d{4}-\d{2}$/.test(id) ? parseUtcDay(`${id}-01`) : null;
  return start === null ? null : periodAt(start);
}

/**
 * Parses a calendar day, `YYYY-MM-DD`, into the UTC midnight that starts it (epoch ms), or
 * returns null when it is not one. The day must exist: Date.parse rolls 2026-02-31 over
 * to March 3rd (and 2026-02-29 to March 1st), so the parts are checked against the day
 * they make. Every date input (usage export days, `period` months) goes through here.
 */
export function parseUtcDay(text: string): number | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (!m) return null;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  const exists = date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
  return exists ? date.getTime() : null;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** The UTC calendar day holding `ms`: [start, end) in epoch milliseconds (every UTC day is 86 400 000 ms in epoch time). */
export function utcDayAt(ms: number): { start: number; end: number } {
  const start = ms - (((ms % DAY_MS) + DAY_MS) % DAY_MS);
  return { start, end: start + DAY_MS };
}

/** Dollars as people read them, in messages and pages: $1.00, $0.25, $0.000001. */
export function formatUsd(usd: number): string {
  return usd.toLocaleString("en-US", { style: "currency", currency: "USD", maximumFractionDigits: 6 });
}
