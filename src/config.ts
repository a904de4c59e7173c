/**
 * The environment of ARCHITECTURE.md §4, parsed by one TypeBox schema. Only src/index.ts and
 * src/cli.ts call loadConfig; everything else receives a Config.
 */
import { isIP } from "node:net";
import { Type as t, type Static } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { usdAmountProblem, usdToNanoCeil, usdToNanoFloor, type UsdAmountRule } from "./money";
import { PRICED_TIER_KEYS } from "./pricing/service-tier";
import { DEFAULT_WEB_RESULT_USD } from "./pricing/web-results";

const Port = t.Integer({ minimum: 1, maximum: 65535 });
const PositiveInt = t.Integer({ minimum: 1 });
const PositiveUsd = t.Number({ exclusiveMinimum: 0 });
const NonNegativeUsd = t.Number({ minimum: 0 });
const TIER_KEY = `(${PRICED_TIER_KEYS.join("|")})=[0-9]+(\\.[0-9]+)?`;
const TIER_MULTIPLIERS_PATTERN = `^${TIER_KEY}(,${TIER_KEY})*$`;

export const ConfigSchema = t.Object({
  NODE_ENV: t.Optional(t.Union([t.Literal("production"), t.Literal("development"), t.Literal("test")])),
  PORT: t.Optional(Port),
  HOST: t.Optional(t.String({ minLength: 1 })),
  DATABASE_URL: t.Optional(t.String({ pattern: "^(sqlite:.+|postgres(ql)?://.+)$" })),
  REDIS_URL: t.Optional(t.String({ pattern: "^rediss?://.+$" })),
  METRICS_TOKEN: t.Optional(t.String({ minLength: 16 })),
  /** The operator's bearer token for /api/v1/admin/*; unset: the admin API is off. */
  ADMIN_TOKEN: t.Optional(t.String({ minLength: 32 })),
  DEFAULT_APP_KEY_FILE: t.Optional(t.String({ minLength: 1 })),
  DATABASE_POOL_SIZE: t.Optional(t.Integer({ minimum: 1, maximum: 500 })),
  DATABASE_TIMEOUT_MS: t.Optional(t.Integer({ minimum: 100, maximum: 60_000 })),
  /** SQLite: `full` syncs every commit to disk, so a power cut loses no committed call (src/store/sqlite/database.ts). */
  SQLITE_SYNCHRONOUS: t.Optional(t.Union([t.Literal("normal"), t.Literal("full")])),
  UPSTREAM_BASE_URL: t.Optional(t.String({ pattern: "^https?://.+$" })),
  UPSTREAM_API_KEY: t.Optional(t.String({ minLength: 1 })),
  /** Where browsers reach this service (an origin, optionally a path prefix): the upstream's PKCE page sends users back here. */
  PUBLIC_URL: t.Optional(t.String({ pattern: "^https?://[^/?#]+(/[^?#]*)?$" })),
  /** The upstream's OAuth PKCE page users approve a key on; unset: UPSTREAM_BASE_URL's origin + `/auth`. */
  UPSTREAM_AUTH_URL: t.Optional(t.String({ pattern: "^https?://[^?#]+$" })),
  JWT_SECRET: t.Optional(t.String({ minLength: 32 })),
  /** The key that seals the secrets kept in the store: base64 of 32 random bytes (src/secrets/). */
  SECRETS_KEY: t.Optional(t.String({ minLength: 1 })),
  /** A file holding SECRETS_KEY (e.g. a mounted secret), instead of the variable. */
  SECRETS_KEY_FILE: t.Optional(t.String({ minLength: 1 })),
  /**
   * Keys replaced by SECRETS_KEY, comma-separated: they still open what they sealed, never
   * seal, until `keys rotate-kek` has re-sealed everything under the current key.
   */
  SECRETS_KEY_PREVIOUS: t.Optional(t.String({ minLength: 1 })),
  SESSION_TTL_SECONDS: t.Optional(t.Integer({ minimum: 30, maximum: 86_400 })),
  /** Largest monthly cap a user may approve. */
  MAX_MONTHLY_USD: t.Optional(PositiveUsd),
  /** Request bodies above this size get 413 before they are parsed. */
  MAX_BODY_BYTES: t.Optional(t.Integer({ minimum: 1024, maximum: 64 * 1024 * 1024 })),
  LOG_LEVEL: t.Optional(t.Union([t.Literal("debug"), t.Literal("info"), t.Literal("warn"), t.Literal("error")])),
  /** Prices (USD per token) for models the upstream catalogue does not list. */
  FALLBACK_PROMPT_USD_PER_TOKEN: t.Optional(NonNegativeUsd),
  FALLBACK_COMPLETION_USD_PER_TOKEN: t.Optional(NonNegativeUsd),
  /** Context length assumed for models the catalogue does not list. */
  FALLBACK_CONTEXT_TOKENS: t.Optional(PositiveInt),
  PRICING_REFRESH_SECONDS: t.Optional(t.Integer({ minimum: 10 })),
  UPSTREAM_TIMEOUT_MS: t.Optional(t.Integer({ minimum: 100 })),
  /** An idle connection to the upstream is reused for less than this; keep it under the upstream's keep-alive timeout. */
  UPSTREAM_IDLE_REUSE_MS: t.Optional(t.Integer({ minimum: 0, maximum: 600_000 })),
  USAGE_FLUSH_MS: t.Optional(t.Integer({ minimum: 1, maximum: 10_000 })),
  /** Embedded counters: a budget account unused for one to two of these is dropped from memory (loaded again at its next use). */
  BUDGET_IDLE_SECONDS: t.Optional(t.Integer({ minimum: 1, maximum: 7 * 86_400 })),
  /** After a client disconnects mid-stream (or a call timed out), how long to keep reading the upstream for the usage. */
  DISCONNECT_DRAIN_MS: t.Optional(t.Integer({ minimum: 0 })),
  /** How often the call journal is looked at for calls to reconcile with the upstream's records. */
  RECONCILE_POLL_MS: t.Optional(t.Integer({ minimum: 10, maximum: 60_000 })),
  /** How long the upstream's record of a generation is waited for, from the call's hand-over to the reconciler; then the call is charged its reservation. */
  RECONCILE_GIVE_UP_SECONDS: t.Optional(t.Integer({ minimum: 0, maximum: 7 * 86_400 })),
  /** Most lookups of the upstream's records in flight at once in one instance. */
  RECONCILE_CONCURRENCY: t.Optional(t.Integer({ minimum: 1, maximum: 256 })),
  /** On SIGTERM, how long in-flight streams may take to finish. */
  SHUTDOWN_GRACE_MS: t.Optional(t.Integer({ minimum: 0 })),
  /** RL_SESSIONS: POST /sessions per app; RL_CHAT: POST /chat/completions per app and user. */
  RL_SESSIONS_LIMIT: t.Optional(PositiveInt),
  RL_SESSIONS_WINDOW_SECONDS: t.Optional(PositiveInt),
  RL_CHAT_LIMIT: t.Optional(PositiveInt),
  RL_CHAT_WINDOW_SECONDS: t.Optional(PositiveInt),
  /** RL_USER_WRITES: a user's writes with a session token (approve, update, revoke, starting a funding link), per app and user. */
  RL_USER_WRITES_LIMIT: t.Optional(PositiveInt),
  RL_USER_WRITES_WINDOW_SECONDS: t.Optional(PositiveInt),
  /** Largest one-time grant an app may ask for, unless the app sets its own. */
  DEFAULT_MAX_GRANT_USD: t.Optional(PositiveUsd),
  /** Grant creation limits: per app, and per client address. */
  RL_GRANTS_APP_LIMIT: t.Optional(PositiveInt),
  RL_GRANTS_IP_LIMIT: t.Optional(PositiveInt),
  RL_GRANTS_WINDOW_SECONDS: t.Optional(PositiveInt),
  /** Consent-page opens (each records a consent request row), per client address: approvals alone draw on the per-app limit. */
  RL_CONSENT_IP_LIMIT: t.Optional(PositiveInt),
  RL_CONSENT_WINDOW_SECONDS: t.Optional(PositiveInt),
  /** Most an app's grants may spend in one UTC day, together, unless the app sets its own. */
  GRANT_DAILY_CEILING_USD: t.Optional(PositiveUsd),
  /**
   * The reverse proxies in front of the service, comma-separated addresses or CIDR ranges: a
   * request from one of them is counted by the client address in X-Forwarded-For (src/request/client-address.ts).
   */
  TRUSTED_PROXY: t.Optional(t.String({ minLength: 1 })),
  /** Wrong admin tokens per client address before its wrong tokens get 429 for the window (the right token always passes). */
  RL_ADMIN_AUTH_LIMIT: t.Optional(PositiveInt),
  RL_ADMIN_AUTH_WINDOW_SECONDS: t.Optional(PositiveInt),
  /** Deadline of every Redis command; past it the call counts as failed. */
  REDIS_COMMAND_TIMEOUT_MS: t.Optional(t.Integer({ minimum: 10, maximum: 10_000 })),
  /** How long a chat call's Idempotency-Key and its answer are kept for retries. */
  IDEMPOTENCY_TTL_SECONDS: t.Optional(t.Integer({ minimum: 60, maximum: 7 * 86_400 })),
  /** Largest answer kept for replay under an Idempotency-Key (it is held in memory while the call runs). */
  IDEMPOTENCY_MAX_ANSWER_BYTES: t.Optional(t.Integer({ minimum: 0, maximum: 64 * 1024 * 1024 })),
  /** max_tokens reserved and sent for a call that names none (clamped to the model's limit). */
  DEFAULT_MAX_TOKENS: t.Optional(t.Integer({ minimum: 16, maximum: 1_000_000 })),
  /** Prompt tokens reserved per input image. */
  IMAGE_TOKENS_BOUND: t.Optional(t.Integer({ minimum: 1, maximum: 1_000_000 })),
  /** Plugins and server tools allowed at a fixed per-call reservation: `fusion=0.05,openrouter:web_fetch=0.01`. */
  /** Waits before each retry of a webhook delivery, in seconds: `5,300,1800`. After the last, it fails. */
  WEBHOOK_RETRY_SCHEDULE_SECONDS: t.Optional(t.String({ pattern: "^[0-9]+(\\.[0-9]+)?(,[0-9]+(\\.[0-9]+)?){0,19}$" })),
  /** How often due webhook deliveries and budget thresholds are looked for. */
  WEBHOOK_POLL_MS: t.Optional(t.Integer({ minimum: 10, maximum: 60_000 })),
  /** Longest wait for a webhook receiver's answer; past it the attempt failed. */
  WEBHOOK_TIMEOUT_MS: t.Optional(t.Integer({ minimum: 100, maximum: 60_000 })),
  /** Local development only: webhooks may go to private, loopback and other non-public addresses. */
  WEBHOOK_ALLOW_PRIVATE_ADDRESSES: t.Optional(t.Boolean()),
  PLUGIN_RESERVATIONS_USD: t.Optional(t.String({ pattern: "^[A-Za-z0-9:_.-]+=[0-9]+(\\.[0-9]+)?(,[A-Za-z0-9:_.-]+=[0-9]+(\\.[0-9]+)?)*$" })),
  /** USD per web result from the upstream's own search engine, on models that list no positive web_search price. */
  WEB_SEARCH_RESULT_USD: t.Optional(PositiveUsd),
  /** Service tiers (and `fast` for `speed: "fast"`) as multipliers of the listed prices: `priority=2,fast=6`. */
  SERVICE_TIER_PRICE_MULTIPLIERS: t.Optional(t.String({ pattern: TIER_MULTIPLIERS_PATTERN })),
  /** Demo mode: the built-in mock streams answers at this many tokens a second (0: at once). */
  DEMO_STREAM_TOKENS_PER_SECOND: t.Optional(t.Integer({ minimum: 0, maximum: 100_000 })),
});

const SECRET_KEYS = new Set([
  "JWT_SECRET",
  "UPSTREAM_API_KEY",
  "REDIS_URL",
  "DATABASE_URL",
  "METRICS_TOKEN",
  "ADMIN_TOKEN",
  "SECRETS_KEY",
  "SECRETS_KEY_PREVIOUS",
]);

type RawConfig = Static<typeof ConfigSchema>;

/** `synchronous`: SQLITE_SYNCHRONOUS (default `normal`). */
export type DatabaseTarget = { engine: "sqlite"; path: string; synchronous?: "normal" | "full" } | { engine: "postgres"; url: string };

export interface Config {
  env: "production" | "development" | "test";
  port: number;
  host: string;
  /** `:memory:` or a file path. */
  /** `sqlite:` path (or `:memory:`), or a PostgreSQL connection URL. */
  database: DatabaseTarget;
  /** When set, GET /metrics needs `Authorization: Bearer <token>`. */
  metricsToken: string | undefined;
  /** When set, the admin API answers `Authorization: Bearer <token>`; unset, it is off (404). */
  adminToken: string | undefined;
  /** Production: where the first start writes the default app's key (else beside the SQLite file, or data/). */
  defaultAppKeyFile: string | undefined;
  /** PostgreSQL: connections per process. */
  databasePoolSize: number;
  /** PostgreSQL: longest wait for a connection, and longest statement (ms); past it, 503. */
  databaseTimeoutMs: number;
  redisUrl?: string;
  upstreamBaseUrl: string;
  upstreamApiKey?: string;
  /** PUBLIC_URL without a trailing slash: the origin (and prefix) browsers reach the service at. */
  publicUrl: string;
  /**
   * The upstream's PKCE page (`/auth`). In demo mode the in-process mock's page, mounted on
   * the service's own origin (`<publicUrl>/demo-upstream/auth`), so the flow runs offline.
   */
  upstreamAuthUrl: string;
  /** True when no upstream key is set outside production: the built-in mock serves. */
  demoMode: boolean;
  jwtSecret?: string;
  /** SECRETS_KEY, checked to be the base64 of 32 bytes; unset: SECRETS_KEY_FILE, else a key file (src/secrets/secrets-key.ts). */
  secretsKey?: string;
  secretsKeyFile?: string;
  /** SECRETS_KEY_PREVIOUS, each checked like SECRETS_KEY: keys that open what they sealed, for a rotation. */
  previousSecretsKeys: string[];
  sessionTtlSeconds: number;
  maxMonthlyUsd: number;
  maxBodyBytes: number;
  logLevel: "debug" | "info" | "warn" | "error";
  fallbackPromptUsdPerToken: number;
  fallbackCompletionUsdPerToken: number;
  fallbackContextTokens: number;
  pricingRefreshSeconds: number;
  upstreamTimeoutMs: number;
  upstreamIdleReuseMs: number;
  usageFlushMs: number;
  budgetIdleMs: number;
  disconnectDrainMs: number;
  reconcile: { pollMs: number; giveUpMs: number; concurrency: number; lookupTimeoutMs: number };
  shutdownGraceMs: number;
  rateLimits: Record<
    "sessions" | "chat" | "userWrites" | "grantsPerApp" | "grantsPerAddress" | "consentPerAddress" | "adminAuthFailures",
    { limit: number; windowMs: number }
  >;
  defaultMaxGrantUsd: number;
  /** The per-app daily ceiling on what grants spend, for apps without their own. */
  grantDailyCeilingNano: number;
  redisCommandTimeoutMs: number;
  idempotencyTtlSeconds: number;
  idempotencyMaxAnswerBytes: number;
  defaultMaxTokens: number;
  imageTokensBound: number;
  /** Nano-dollars reserved per call for each plugin id or server-tool type the operator allows. */
  pluginReservationsNano: ReadonlyMap<string, number>;
  /** Nano-dollars per web result from the upstream's own engine (src/pricing/web-results.ts). */
  webSearchResultNano: number;
  /** Service tiers (and `fast` for `speed: "fast"`) priced as multipliers of the listed prices (src/pricing/service-tier.ts). */
  serviceTierMultipliers: ReadonlyMap<string, number>;
  webhooks: { retryScheduleMs: number[]; pollMs: number; timeoutMs: number; allowPrivateAddresses: boolean };
  /** TRUSTED_PROXY's entries: addresses and CIDR ranges whose X-Forwarded-For is believed. */
  trustedProxies: string[];
  /** Demo mode: tokens a second the built-in mock streams at (packages/mock-upstream/src/pacing.ts); 0: unpaced. */
  demoStreamTokensPerSecond: number;
}

/** Where demo mode serves the in-process mock's PKCE page on the service's own origin. */
export const DEMO_AUTH_PAGE_PATH = "/demo-upstream/auth";

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join("\n  ")}`);
  }
}

/** Parses the environment; throws ConfigError naming every bad key. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const raw: Record<string, unknown> = {};
  for (const key of Object.keys(ConfigSchema.properties)) {
    const value = env[key];
    if (value !== undefined && value !== "") raw[key] = value;
  }
  const converted = Value.Convert(ConfigSchema, raw);
  const problems = [...Value.Errors(ConfigSchema, converted)].map((e) => {
    const key = e.path.slice(1) || "(root)";
    // Never echo a secret back, not even into the operator's terminal.
    const shown = SECRET_KEYS.has(key) ? "" : ` (got ${JSON.stringify(raw[key])})`;
    return `${key}: ${e.message}${shown}`;
  });
  problems.push(...usdAmountProblems(converted as RawConfig, env, new Set(problems.map((p) => p.slice(0, p.indexOf(":"))))));
  problems.push(...trustedProxies((converted as RawConfig).TRUSTED_PROXY).flatMap((entry) => trustedProxyProblem(entry) ?? []));
  if (problems.length > 0) throw new ConfigError(problems);
  return fromRaw(converted as RawConfig);
}

/**
 * Dollar amounts are counted in whole nano-dollars (src/money.ts): one below a nano-dollar
 * cannot be counted, and a cap that rounds down to 0 would turn its budget off. Prices per
 * token are rates kept as fractions of a nano-dollar (src/pricing/model-price.ts), so the
 * FALLBACK_* prices need only be finite and >= 0 (0: unlisted models are free), which the
 * schema checks. Keys the schema already refused are not told twice.
 */
const CAP: UsdAmountRule = { rounding: "floor" };
/** A price the service reserves is never under-counted, and never 0 (a search reserved as free is the hole it closes). */
const PRICE: UsdAmountRule = { rounding: "ceil" };
const USD_AMOUNT_KEYS = { MAX_MONTHLY_USD: CAP, DEFAULT_MAX_GRANT_USD: CAP, GRANT_DAILY_CEILING_USD: CAP, WEB_SEARCH_RESULT_USD: PRICE } as const;
/** A plugin's per-call reservation may be 0: the operator allows it and reserves nothing for it. */
const PLUGIN_RESERVATION: UsdAmountRule = { rounding: "ceil", zeroAllowed: true };

function usdAmountProblems(parsed: RawConfig, given: Record<string, unknown>, refused: Set<string>): string[] {
  const problems: string[] = [];
  for (const [key, rule] of Object.entries(USD_AMOUNT_KEYS)) {
    const usd = parsed[key as keyof typeof USD_AMOUNT_KEYS];
    const problem = usd === undefined || refused.has(key) ? null : usdAmountProblem(usd, rule);
    if (problem) problems.push(`${key}: ${problem} (got ${JSON.stringify(given[key])})`);
  }
  for (const [id, usd] of refused.has("PLUGIN_RESERVATIONS_USD") ? [] : reservationPairs(parsed.PLUGIN_RESERVATIONS_USD)) {
    const problem = usdAmountProblem(usd, PLUGIN_RESERVATION);
    if (problem) problems.push(`PLUGIN_RESERVATIONS_USD: ${id}'s reservation ${problem}`);
  }
  for (const [tier, multiplier] of refused.has("SERVICE_TIER_PRICE_MULTIPLIERS") ? [] : reservationPairs(parsed.SERVICE_TIER_PRICE_MULTIPLIERS)) {
    // Below 1 a tier would reserve less than the listed price, which the provider bills when it
    // serves the request on its standard tier instead (flex may fall back so).
    if (!(multiplier >= 1 && multiplier <= 1000))
      problems.push(`SERVICE_TIER_PRICE_MULTIPLIERS: ${tier}'s multiplier must be from 1 to 1000 (got ${multiplier})`);
  }
  return problems;
}

const trustedProxies = (text: string | undefined) =>
  (text ?? "")
    .split(",")
    .map((e) => e.trim())
    .filter((e) => e !== "");

/** An entry of TRUSTED_PROXY that is neither an IP address nor a CIDR range, named. */
function trustedProxyProblem(entry: string): string | null {
  const [address = "", prefix, ...rest] = entry.split("/");
  const family = isIP(address);
  const most = family === 4 ? 32 : 128;
  if (family === 0 || rest.length > 0) return `TRUSTED_PROXY: ${JSON.stringify(entry)} is not an IP address or a CIDR range`;
  if (prefix === undefined || (/^\d+$/.test(prefix) && Number(prefix) <= most)) return null;
  return `TRUSTED_PROXY: ${JSON.stringify(entry)}'s prefix length must be from 0 to ${most}`;
}

function fromRaw(raw: RawConfig): Config {
  const env = raw.NODE_ENV ?? "development";
  const dbUrl = raw.DATABASE_URL ?? "sqlite:data/proxy.sqlite";
  const database: DatabaseTarget = dbUrl.startsWith("sqlite:")
    ? { engine: "sqlite", path: dbUrl.slice("sqlite:".length), synchronous: raw.SQLITE_SYNCHRONOUS ?? "normal" }
    : { engine: "postgres", url: dbUrl };
  if (env === "production" && !raw.UPSTREAM_API_KEY) {
    throw new ConfigError(["UPSTREAM_API_KEY: required when NODE_ENV=production (demo mode is for development only)"]);
  }
  checkSecretsKey(raw, env, database);
  const port = raw.PORT ?? 8787;
  const upstreamBaseUrl = (raw.UPSTREAM_BASE_URL ?? "https://openrouter.ai/api/v1").replace(/\/+$/, "");
  const publicUrl = (raw.PUBLIC_URL ?? `http://localhost:${port}`).replace(/\/+$/, "");
  const demoMode = !raw.UPSTREAM_API_KEY;
  const upstreamTimeoutMs = raw.UPSTREAM_TIMEOUT_MS ?? 60_000;
  return {
    env,
    port,
    host: raw.HOST ?? "0.0.0.0",
    database,
    defaultAppKeyFile: raw.DEFAULT_APP_KEY_FILE,
    metricsToken: raw.METRICS_TOKEN,
    adminToken: raw.ADMIN_TOKEN,
    databasePoolSize: raw.DATABASE_POOL_SIZE ?? 10,
    databaseTimeoutMs: raw.DATABASE_TIMEOUT_MS ?? 5000,
    redisUrl: raw.REDIS_URL,
    upstreamBaseUrl,
    upstreamApiKey: raw.UPSTREAM_API_KEY,
    publicUrl,
    // OpenRouter serves its PKCE page at the site's root (`https://openrouter.ai/auth`), not under /api/v1.
    upstreamAuthUrl: demoMode ? `${publicUrl}${DEMO_AUTH_PAGE_PATH}` : (raw.UPSTREAM_AUTH_URL ?? `${new URL(upstreamBaseUrl).origin}/auth`),
    demoMode,
    jwtSecret: raw.JWT_SECRET,
    secretsKey: raw.SECRETS_KEY,
    secretsKeyFile: raw.SECRETS_KEY_FILE,
    previousSecretsKeys: previousSecretsKeys(raw.SECRETS_KEY_PREVIOUS),
    sessionTtlSeconds: raw.SESSION_TTL_SECONDS ?? 600,
    maxMonthlyUsd: raw.MAX_MONTHLY_USD ?? 1000,
    maxBodyBytes: raw.MAX_BODY_BYTES ?? 4 * 1024 * 1024,
    logLevel: raw.LOG_LEVEL ?? "info",
    // Fallback prices are deliberately high so that an unknown model can never be
    // under-reserved: $15 / $75 per million tokens, the top of OpenRouter's common range.
    fallbackPromptUsdPerToken: raw.FALLBACK_PROMPT_USD_PER_TOKEN ?? 0.000015,
    fallbackCompletionUsdPerToken: raw.FALLBACK_COMPLETION_USD_PER_TOKEN ?? 0.000075,
    fallbackContextTokens: raw.FALLBACK_CONTEXT_TOKENS ?? 128_000,
    pricingRefreshSeconds: raw.PRICING_REFRESH_SECONDS ?? 600,
    upstreamTimeoutMs,
    // Two seconds: under the 5 s keep-alive of Node's and uvicorn's servers with room for
    // their close to arrive. Shorter costs a connection (and TLS handshake) more often.
    upstreamIdleReuseMs: raw.UPSTREAM_IDLE_REUSE_MS ?? 2000,
    usageFlushMs: raw.USAGE_FLUSH_MS ?? 100,
    // Ten minutes: a user between two questions keeps their counters; one gone for the day
    // does not. Loading an account again costs two reads of its totals row.
    budgetIdleMs: (raw.BUDGET_IDLE_SECONDS ?? 600) * 1000,
    // Five minutes: a long generation runs to its end whether or not anyone reads it (and a
    // provider that cannot cancel bills it all), so its usage is worth the wait; past it the
    // upstream's record of the generation settles the call.
    disconnectDrainMs: raw.DISCONNECT_DRAIN_MS ?? 300_000,
    // OpenRouter's generation records usually appear within seconds; fifteen minutes of
    // looking (backing off to once a minute) before the reservation is charged instead.
    // Sixteen lookups at once: a backlog of stranded calls clears sixteen per lookup, so even
    // with every lookup hanging to its deadline (UPSTREAM_TIMEOUT_MS, a minute) a thousand
    // calls are through within about an hour of giving up, and a healthy upstream answering
    // in 200 ms clears 80 a second; a small share of the upstream connections chat calls use.
    reconcile: {
      pollMs: raw.RECONCILE_POLL_MS ?? 1000,
      giveUpMs: (raw.RECONCILE_GIVE_UP_SECONDS ?? 900) * 1000,
      concurrency: raw.RECONCILE_CONCURRENCY ?? 16,
      // The upstream client's deadline on a GET (src/upstream/client.ts): a lookup's longest wait.
      lookupTimeoutMs: upstreamTimeoutMs,
    },
    shutdownGraceMs: raw.SHUTDOWN_GRACE_MS ?? 30_000,
    rateLimits: {
      sessions: { limit: raw.RL_SESSIONS_LIMIT ?? 120, windowMs: (raw.RL_SESSIONS_WINDOW_SECONDS ?? 60) * 1000 },
      chat: { limit: raw.RL_CHAT_LIMIT ?? 30, windowMs: (raw.RL_CHAT_WINDOW_SECONDS ?? 60) * 1000 },
      // Each write emits a webhook to the app. Thirty a minute is far past what a person
      // clicks on a connect page (approve, change the cap, link an account, revoke), while a
      // script holding a token cannot flood the app's receivers (or the outbox) through it.
      userWrites: { limit: raw.RL_USER_WRITES_LIMIT ?? 30, windowMs: (raw.RL_USER_WRITES_WINDOW_SECONDS ?? 60) * 1000 },
      grantsPerApp: { limit: raw.RL_GRANTS_APP_LIMIT ?? 60, windowMs: (raw.RL_GRANTS_WINDOW_SECONDS ?? 60) * 1000 },
      grantsPerAddress: { limit: raw.RL_GRANTS_IP_LIMIT ?? 10, windowMs: (raw.RL_GRANTS_WINDOW_SECONDS ?? 60) * 1000 },
      // Twice the approval limit per address: every approval opens a page first, and some
      // pages are denied or closed. Only per client: a per-app count of pages would let a
      // few strangers' loads shut the app's real users out; approvals keep theirs.
      consentPerAddress: { limit: raw.RL_CONSENT_IP_LIMIT ?? 20, windowMs: (raw.RL_CONSENT_WINDOW_SECONDS ?? 60) * 1000 },
      adminAuthFailures: { limit: raw.RL_ADMIN_AUTH_LIMIT ?? 10, windowMs: (raw.RL_ADMIN_AUTH_WINDOW_SECONDS ?? 60) * 1000 },
    },
    defaultMaxGrantUsd: raw.DEFAULT_MAX_GRANT_USD ?? 5,
    // $100 a day: twenty fully spent grants of the default largest size ($5), room for a small app's busy
    // day, while a consent flow that is abused (or a page that loops) costs the operator at
    // most $100 a day of upstream spend. Apps that need more get their own ceiling.
    grantDailyCeilingNano: usdToNanoFloor(raw.GRANT_DAILY_CEILING_USD ?? 100),
    redisCommandTimeoutMs: raw.REDIS_COMMAND_TIMEOUT_MS ?? 250,
    // A day, as Stripe keeps its keys: longer than any client's retry schedule.
    idempotencyTtlSeconds: raw.IDEMPOTENCY_TTL_SECONDS ?? 86_400,
    // 8 MiB holds a 32k-token streamed answer (about 200 bytes of SSE per token).
    idempotencyMaxAnswerBytes: raw.IDEMPOTENCY_MAX_ANSWER_BYTES ?? 8 * 1024 * 1024,
    // A call without max_tokens reserves this, not the model's whole limit (16k-128k), so
    // one call cannot lock a user's budget away from their concurrent calls while it runs.
    // 4096 covers a long answer from most chat models; a client can always ask for more.
    defaultMaxTokens: raw.DEFAULT_MAX_TOKENS ?? 4096,
    // Above what one image costs on the common vision models (OpenAI high detail about
    // 1.1k, Anthropic about 1.6k, Gemini 258 per image); the context length caps it anyway.
    imageTokensBound: raw.IMAGE_TOKENS_BOUND ?? 4096,
    pluginReservationsNano: parseReservations(raw.PLUGIN_RESERVATIONS_USD),
    // OpenRouter's web search pricing: $4 per 1,000 results from its engine (Exa).
    webSearchResultNano: usdToNanoCeil(raw.WEB_SEARCH_RESULT_USD ?? DEFAULT_WEB_RESULT_USD),
    // Unset: every premium tier is refused, since the catalogue lists no tier's rate.
    serviceTierMultipliers: new Map(reservationPairs(raw.SERVICE_TIER_PRICE_MULTIPLIERS)),
    trustedProxies: trustedProxies(raw.TRUSTED_PROXY),
    webhooks: {
      // First try at once, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: about 27.5 hours
      // in all, so a receiver down for most of a day still gets every event.
      retryScheduleMs: (raw.WEBHOOK_RETRY_SCHEDULE_SECONDS ?? "5,300,1800,7200,18000,36000,36000").split(",").map((s) => Math.round(Number(s) * 1000)),
      pollMs: raw.WEBHOOK_POLL_MS ?? 1000,
      timeoutMs: raw.WEBHOOK_TIMEOUT_MS ?? 10_000,
      allowPrivateAddresses: raw.WEBHOOK_ALLOW_PRIVATE_ADDRESSES ?? false,
    },
    // Slow enough that someone trying the service sees the answer arrive word by word (the
    // mock's default 16-word answer takes about half a second), quick enough to keep no one
    // waiting. The test harnesses set 0 (full speed); only demo mode reads it.
    demoStreamTokensPerSecond: raw.DEMO_STREAM_TOKENS_PER_SECOND ?? 30,
  };
}

/**
 * SECRETS_KEY is the base64 of exactly 32 bytes (`openssl rand -base64 32`), never a
 * passphrase: it is the AES-256 key itself. Instances sharing a PostgreSQL store must share
 * it, so in production it cannot be left to a key file on one machine.
 */
function checkSecretsKey(raw: RawConfig, env: Config["env"], database: DatabaseTarget): void {
  const problems: string[] = [];
  if (raw.SECRETS_KEY !== undefined && !SECRETS_KEY_FORM.test(raw.SECRETS_KEY)) problems.push(`SECRETS_KEY: ${SECRETS_KEY_RULE}`);
  if (raw.SECRETS_KEY !== undefined && raw.SECRETS_KEY_FILE !== undefined) problems.push("SECRETS_KEY_FILE: set SECRETS_KEY or SECRETS_KEY_FILE, not both");
  // Each key is named by its place in the list, never by its value.
  for (const [i, key] of previousSecretsKeys(raw.SECRETS_KEY_PREVIOUS).entries()) {
    if (!SECRETS_KEY_FORM.test(key)) problems.push(`SECRETS_KEY_PREVIOUS: key ${i + 1} ${SECRETS_KEY_RULE}`);
  }
  if (env === "production" && database.engine === "postgres" && raw.SECRETS_KEY === undefined && raw.SECRETS_KEY_FILE === undefined) {
    problems.push("SECRETS_KEY: required when NODE_ENV=production with PostgreSQL (every instance must seal and open the stored secrets with the same key)");
  }
  if (problems.length > 0) throw new ConfigError(problems);
}

/** `key,key`: spaces around a key are dropped (a list pasted over several lines). */
const previousSecretsKeys = (text: string | undefined): string[] =>
  (text ?? "")
    .split(",")
    .map((k) => k.trim())
    .filter((k) => k !== "");

/** Standard base64 of 32 bytes: 43 characters and one `=`. */
export const SECRETS_KEY_FORM = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/;
export const SECRETS_KEY_RULE = "must be the base64 of 32 random bytes (e.g. `openssl rand -base64 32`)";

/** `id=usd,id=usd` → [id, usd] pairs (the schema's pattern has checked the form). */
function reservationPairs(text: string | undefined): Array<[string, number]> {
  return (text ? text.split(",") : []).map((pair) => {
    const eq = pair.lastIndexOf("=");
    return [pair.slice(0, eq), Number(pair.slice(eq + 1))];
  });
}

/** Nano-dollars per id, rounded up: a reservation is never under-counted (loadConfig has checked each). */
function parseReservations(text: string | undefined): ReadonlyMap<string, number> {
  return new Map(reservationPairs(text).map(([id, usd]) => [id, usdToNanoCeil(usd)]));
}
