import { t, type TSchema } from "elysia";
import { ERROR_CODES, type BudgetErrorDetails } from "../errors";

/**
 * Shared response models. Route-specific request models live beside their routes.
 * These are what openapi.json publishes, and Elysia checks responses against them.
 */

/**
 * The one error envelope (ARCHITECTURE.md §3 "Errors"), built from src/errors.ts so that the
 * published codes and budget fields cannot drift from what the service sends. openapi.json
 * publishes it once, as components.schemas.Error, and every error response refers to it.
 * Error bodies are serialised by the error handler, so this schema documents them only.
 */
const budgetErrorFields = {
  limitUsd: t.Optional(t.Number({ description: "Budget errors: the cap, USD." })),
  usedUsd: t.Optional(t.Number({ description: "Budget errors: settled spend in the period, USD." })),
  remainingUsd: t.Optional(t.Number({ description: "Budget errors: what is left for new requests, USD." })),
  resetsAt: t.Optional(t.String({ format: "date-time", description: "Budget errors: when the period's usage resets." })),
} satisfies Record<keyof BudgetErrorDetails, TSchema>;

export const ErrorEnvelope = t.Object(
  {
    error: t.Object(
      {
        code: t.String({ enum: ERROR_CODES, description: "Stable machine-readable code; its HTTP status is fixed by the code." }),
        message: t.String({ description: "Human-readable explanation." }),
        ...budgetErrorFields,
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false, description: "The envelope of every error; `error.code` fixes the HTTP status." },
);

/** Standard error responses for a route, by the statuses it can return. */
export function errorResponses(...statuses: number[]) {
  return Object.fromEntries(statuses.map((s) => [s, ErrorEnvelope])) as Record<number, typeof ErrorEnvelope>;
}

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

export const StatusModel = t.Object(budgetFields);

export const ConnectionStatusModel = t.Object({
  ...budgetFields,
  appUserId: t.String(),
  fundingStatus: t.Union([t.Literal("ok"), t.Literal("invalid")], {
    description: "`invalid` after the upstream refused payment; cleared by approving again.",
  }),
  connectedAt: t.Nullable(IsoTime),
  updatedAt: t.Nullable(IsoTime),
});

/** A user id as the app knows it; opaque to us. */
export const AppUserId = t.String({ minLength: 1, maxLength: 256 });

export const MonthlyUsd = t.Number({ exclusiveMinimum: 0, description: "Monthly cap in USD, at least 0.000000001 (one nano-dollar)." });
