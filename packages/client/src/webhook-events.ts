/**
 * The events the service posts to an app's webhook endpoints, `{type, timestamp, data}`
 * (README "Webhooks", ARCHITECTURE.md §6). The service builds their `data` in
 * src/store/connection-events.ts and src/webhooks/budget-watcher.ts; tests/client compares
 * the list with the service's own and real deliveries' `data` with these types.
 */

export const WEBHOOK_EVENT_TYPES = [
  "connection.approved",
  "connection.updated",
  "connection.revoked",
  "budget.threshold",
  "funding.invalid",
  "grant.exhausted",
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** A user approved a cap: the first time, or again after a revoke. */
export interface ConnectionApprovedData {
  appId: string;
  userId: string;
  monthlyUsd: number;
  /** ISO 8601. */
  connectedAt: string;
}

/** An active connection's cap changed, or its funding was restored by a new approval. */
export interface ConnectionUpdatedData {
  appId: string;
  userId: string;
  monthlyUsd: number;
  previousMonthlyUsd: number;
  fundingRestored: boolean;
}

/** The user or the operator revoked the connection: the user's calls now get NotConnectedError. */
export interface ConnectionRevokedData {
  appId: string;
  userId: string;
}

/** The upstream refused payment for the user's calls; they must approve again. */
export interface FundingInvalidData {
  appId: string;
  userId: string;
}

/** Spend passed 80 % of the monthly cap, or used it up (100 %); each at most once a month. */
export interface BudgetThresholdData {
  appId: string;
  userId: string;
  threshold: 80 | 100;
  /**
   * `spent`: the spend reached `threshold` % of the cap. `refused` (100 only): a call was
   * refused because what is left of the cap does not cover even its smallest reservation,
   * so the user can spend no more this month although the spend stopped short of the cap.
   */
  reason: "spent" | "refused";
  /**
   * The share of the cap spent, in percent, rounded down to two decimals: at least
   * `threshold` for `spent`, below it for `refused` (e.g. 82.83). Over 100 only when the
   * upstream billed above its listed price.
   */
  usedPercent: number;
  limitUsd: number;
  usedUsd: number;
  period: { start: string; end: string };
  /** ISO 8601. */
  resetsAt: string;
}

/** A one-time grant's budget or uses are spent. */
export interface GrantExhaustedData {
  appId: string;
  grantId: string;
  reason: "budget" | "uses";
  usdCap: number;
  usedUsd: number;
  uses: number;
  /** Null when the grant limits dollars only. */
  maxUses: number | null;
}

interface EventData {
  "connection.approved": ConnectionApprovedData;
  "connection.updated": ConnectionUpdatedData;
  "connection.revoked": ConnectionRevokedData;
  "budget.threshold": BudgetThresholdData;
  "funding.invalid": FundingInvalidData;
  "grant.exhausted": GrantExhaustedData;
}

/** One event; `switch (event.type)` narrows `data`. */
export type WebhookEvent = {
  [T in WebhookEventType]: {
    type: T;
    /** ISO 8601: when the event happened (not when this delivery was sent). */
    timestamp: string;
    data: EventData[T];
  };
}[WebhookEventType];
