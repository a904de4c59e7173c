import { t, type TSchema } from "elysia";
import { ERROR_CODES, type BudgetErrorDetails } from "./errors";

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
