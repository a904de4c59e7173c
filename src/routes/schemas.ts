import { t } from "elysia";

/**
 * Response and field schemas that several routes share. Route-specific request models live
 * beside their routes; the error envelope lives beside the errors (src/error-schema.ts).
 * These are what openapi.json publishes, and Elysia checks responses against them.
 */

export const Usd = t.Number({ description: "US dollars." });
const IsoTime = t.String({ format: "date-time" });

export const PeriodModel = t.Object({ start: IsoTime, end: IsoTime }, { description: "The current UTC calendar month; end is exclusive." });

const budgetFields = {
  connected: t.Boolean(),
  limits: t.Object({ monthlyUsd: Usd }),
  usage: t.Object({ monthlyUsd: t.Number({ description: "Settled spend in the current period, USD." }) }),
  remainingUsd: t.Number({ description: "What a new request can still draw on: limit minus usage minus in-flight reservations." }),
  period: PeriodModel,
  resetsAt: t.String({ format: "date-time", description: "When usage resets (the period's end)." }),
};

const fundingSource = t.Union([t.Literal("app"), t.Literal("user")], {
  description: "Who pays the user's calls: `app`, the app's operator; `user`, the user's own upstream account. `app` while not connected.",
});

const upstreamCredit = t.Nullable(
  t.Object({
    remainingUsd: t.Nullable(t.Number({ description: "What the key's limit leaves, USD; null when the key has no limit." })),
    limitUsd: t.Nullable(t.Number({ description: "The key's credit limit, USD; null when it has none." })),
  }),
  {
    description:
      "What the upstream says is left on the user's own key (its key endpoint, read at most every 30 s), apart from `remainingUsd`, which stays the cap minus usage. " +
      "Null unless the user pays with their own account, or when the upstream did not say.",
  },
);

export const StatusModel = t.Object({ ...budgetFields, fundingSource, upstreamCredit });

export const ConnectionStatusModel = t.Object({
  ...budgetFields,
  fundingSource,
  upstreamCredit,
  appUserId: t.String(),
  fundingStatus: t.Union([t.Literal("ok"), t.Literal("invalid")], {
    description: "`invalid` after the upstream refused payment; cleared by approving again.",
  }),
  connectedAt: t.Nullable(IsoTime),
  updatedAt: t.Nullable(IsoTime),
});

/**
 * A user id as the app knows it; opaque to us. The schema bounds its length in UTF-16 units;
 * routes then hold it to the one rule in bytes (checkAppUserId, src/auth/app-user-id.ts).
 */
export const AppUserId = t.String({
  minLength: 1,
  maxLength: 256,
  description: "The app's id for the user: 1 to 256 bytes of UTF-8, no control characters.",
});

export const MonthlyUsd = t.Number({ exclusiveMinimum: 0, description: "Monthly cap in USD, at least 0.000000001 (one nano-dollar)." });
