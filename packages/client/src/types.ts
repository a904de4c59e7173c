/**
 * The answers of the endpoints an app's backend calls, as the service's openapi.json
 * documents them (README "API at a glance"). tests/client/openapi-types.test.ts compares
 * every field, its JSON type and whether it may be null with the served document.
 */

/** POST /api/v1/sessions: a session token for the app's browser code. */
export interface SessionToken {
  /** Send as `Authorization: Bearer` from the browser (approve, read, revoke the connection). */
  token: string;
  /** Unix seconds. */
  expiresAt: number;
}

/** The current period: a UTC calendar month; `end` is exclusive. */
export interface Period {
  /** ISO 8601. */
  start: string;
  /** ISO 8601, exclusive: the instant usage resets. */
  end: string;
}

/** GET /api/v1/status: one user's connection and budget. */
export interface UserStatus {
  connected: boolean;
  limits: { monthlyUsd: number };
  /** Settled spend in the current period, USD. */
  usage: { monthlyUsd: number };
  /** What a new request can still draw on: limit minus usage minus in-flight reservations. */
  remainingUsd: number;
  period: Period;
  /** ISO 8601: when usage resets (the period's end). */
  resetsAt: string;
  /** Who pays the user's calls: `app`, the app's operator; `user`, the user's own upstream account. `app` while not connected. */
  fundingSource: "app" | "user";
  /**
   * What the upstream says is left on the user's own key, read at most every 30 s; null unless
   * the user pays with their own account, or when the upstream did not say. `remainingUsd`
   * above stays the cap minus usage.
   */
  upstreamCredit: UpstreamCredit | null;
}

/** The upstream's own credit on a user's key, USD; each null when the key has no limit. */
export interface UpstreamCredit {
  remainingUsd: number | null;
  limitUsd: number | null;
}

/** One metered call: a row of the user's ledger. */
export interface UsageRow {
  /** Equals the chat call's `x-request-id`. */
  requestId: string;
  model: string;
  generationId: string | null;
  promptTokens: number;
  completionTokens: number;
  costUsd: number;
  /**
   * How the cost was found: the answer's usage (`upstream`, `computed`), the upstream's record
   * of the generation when the proxy did not see the usage (`generation`), or the whole
   * reservation when nothing could say (`reservation`); `estimated` on older rows.
   */
  source: "upstream" | "computed" | "generation" | "reservation" | "estimated";
  /** `ok`, or what went wrong (e.g. `upstream_500`). */
  status: string;
  streamed: boolean;
  /** ISO 8601. */
  startedAt: string;
  /** ISO 8601. */
  finishedAt: string;
  /** What the call reserved before it went upstream. */
  reservedUsd: number | null;
  /** How much the cost passed the reservation (README "The hard cap"); normally 0. */
  overrunUsd: number;
}

/** GET /api/v1/usage: one page of a user's ledger rows, newest first. */
export interface UsagePage {
  /** YYYY-MM (UTC). */
  period: string;
  data: UsageRow[];
  /** Pass as `cursor` for the next (older) page; null on the last one. */
  nextCursor: string | null;
}

/** GET/POST /api/v1/connections: the user's connection as their own browser code sees it. */
export interface ConnectionStatus extends UserStatus {
  appUserId: string;
  /** `invalid` after the upstream refused payment: the user must approve again. */
  fundingStatus: "ok" | "invalid";
  /** ISO 8601, null when never connected. */
  connectedAt: string | null;
  updatedAt: string | null;
}
