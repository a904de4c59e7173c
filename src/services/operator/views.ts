/**
 * What the operator sees of each result, one schema each: the CLI prints these objects as
 * JSON lines, the admin API returns them and publishes these schemas in openapi.json, so
 * the two cannot show different things. Amounts are USD (the boundary, ARCHITECTURE.md §3
 * "Money"); times are ISO 8601. The order of fields is the order the CLI prints them in.
 */
import { Type as t, type Static, type TSchema } from "@sinclair/typebox";

const Time = t.String({ format: "date-time" });
const TimeOrNull = t.Union([Time, t.Null()]);
const Usd = t.Number({ description: "US dollars." });
const SecretKey = t.String({ description: "`sk_live_{appId}_{secret}`: shown only in this response, stored only hashed." });

export const AppKeyView = t.Object({ keyId: t.String(), createdAt: Time, revokedAt: TimeOrNull });

export const AppView = t.Object({
  appId: t.String(),
  name: t.String(),
  origins: t.Array(t.String()),
  createdAt: Time,
  disabledAt: TimeOrNull,
  keys: t.Array(AppKeyView, { description: "Every key the app was issued, revoked ones included; never a secret." }),
});

export const AppDetailsView = t.Object({
  ...AppView.properties,
  maxGrantUsd: t.Union([Usd, t.Null()], { description: "Largest one-time grant the app may ask for; null: the service default (DEFAULT_MAX_GRANT_USD)." }),
});

export const CreatedAppView = t.Object({
  appId: t.String(),
  secretKey: SecretKey,
  name: t.String(),
  origins: t.Array(t.String()),
  keyId: t.String(),
  maxGrantUsd: t.Optional(t.Number({ description: "Present when the app has its own largest grant." })),
});

export const UpdatedAppView = t.Object({ appId: t.String(), name: t.String(), origins: t.Array(t.String()), maxGrantUsd: AppDetailsView.properties.maxGrantUsd });

export const AppStateView = t.Object({ appId: t.String(), disabled: t.Boolean() });

export const KeyView = t.Object({ appId: t.String(), ...AppKeyView.properties });

export const IssuedKeyView = t.Object({ appId: t.String(), keyId: t.String(), secretKey: SecretKey });

export const RevokedKeyView = t.Object({ appId: t.String(), keyId: t.String(), revoked: t.Literal(true) });

const FundingStatus = t.Union([t.Literal("ok"), t.Literal("invalid")]);

export const ConnectionView = t.Object({
  appUserId: t.String(),
  monthlyUsd: Usd,
  fundingStatus: FundingStatus,
  connectedAt: Time,
  revokedAt: TimeOrNull,
});

export const ConnectionDetailsView = t.Object({
  appUserId: t.String(),
  monthlyUsd: Usd,
  usedUsd: t.Number({ description: "Settled spend in `period`, as recorded in the ledger." }),
  period: t.String({ description: "The current UTC month, YYYY-MM." }),
  fundingStatus: FundingStatus,
  connectedAt: Time,
  updatedAt: Time,
  revokedAt: TimeOrNull,
});

export const RevokedConnectionView = t.Object({ appId: t.String(), appUserId: t.String(), revoked: t.Literal(true) });

export const GrantView = t.Object({
  grantId: t.String(),
  usd: Usd,
  uses: t.Integer(),
  maxUses: t.Union([t.Integer(), t.Null()]),
  origin: t.String(),
  createdAt: Time,
  expiresAt: Time,
  revokedAt: TimeOrNull,
});

export const RevokedGrantView = t.Object({ appId: t.String(), grantId: t.String(), revoked: t.Literal(true) });

export const UsageExportRowView = t.Object({
  requestId: t.String(),
  startedAt: Time,
  appUserId: t.Union([t.String(), t.Null()]),
  grantId: t.Union([t.String(), t.Null()]),
  model: t.String(),
  generationId: t.Union([t.String(), t.Null()]),
  promptTokens: t.Integer(),
  completionTokens: t.Integer(),
  costUsd: Usd,
  source: t.Union([t.Literal("upstream"), t.Literal("computed"), t.Literal("estimated")]),
  status: t.String(),
  streamed: t.Boolean(),
  reservedUsd: t.Union([Usd, t.Null()]),
  overrunUsd: Usd,
});

/** One page of a list that grows with an app's users: pass `nextCursor` back for the next. */
export const PageView = <T extends TSchema>(item: T) =>
  t.Object({ data: t.Array(item), nextCursor: t.Union([t.String(), t.Null()], { description: "Pass as `cursor` for the next page; null on the last." }) });

export interface Page<T> {
  data: T[];
  nextCursor: string | null;
}

export type AppView = Static<typeof AppView>;
export type AppDetailsView = Static<typeof AppDetailsView>;
export type CreatedAppView = Static<typeof CreatedAppView>;
export type UpdatedAppView = Static<typeof UpdatedAppView>;
export type AppStateView = Static<typeof AppStateView>;
export type KeyView = Static<typeof KeyView>;
export type IssuedKeyView = Static<typeof IssuedKeyView>;
export type RevokedKeyView = Static<typeof RevokedKeyView>;
export type ConnectionView = Static<typeof ConnectionView>;
export type ConnectionDetailsView = Static<typeof ConnectionDetailsView>;
export type RevokedConnectionView = Static<typeof RevokedConnectionView>;
export type GrantView = Static<typeof GrantView>;
export type RevokedGrantView = Static<typeof RevokedGrantView>;
export type UsageExportRowView = Static<typeof UsageExportRowView>;
