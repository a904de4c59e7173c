/**
 * What the operator sees of each result, one schema each: the CLI prints these objects as
 * JSON lines, the admin API returns them and publishes these schemas in openapi.json, so
 * the two cannot show different things. Amounts are USD (the boundary, ARCHITECTURE.md §3
 * "Money"); times are ISO 8601. The order of fields is the order the CLI prints them in.
 */
import { Type as t, type Static, type TSchema } from "@sinclair/typebox";

/** How a ledger row's cost was found (src/budget/usage-row.ts UsageSource); shared by /usage and the operator's export. */
export const UsageSourceView = t.Union(
  [t.Literal("upstream"), t.Literal("computed"), t.Literal("generation"), t.Literal("reservation"), t.Literal("estimated")],
  {
    description:
      "How the cost was found: `upstream` (the answer's usage.cost), `computed` (its token counts at the listed prices), `generation` (the upstream's record of the generation, for a call whose usage the proxy did not see: the client left, a timeout, a cut stream, an instance that died), `reservation` (the reservation charged whole: no record could say), `estimated` (rows from before calls were reconciled).",
  },
);

const Time = t.String({ format: "date-time" });
const TimeOrNull = t.Union([Time, t.Null()]);
const Usd = t.Number({ description: "US dollars." });
const SecretKey = t.String({ description: "`sk_live_{appId}_{secret}`: shown only in this response, stored only hashed." });

export const AppKeyView = t.Object({ keyId: t.String(), createdAt: Time, revokedAt: TimeOrNull });

const GrantLimits = {
  maxGrantUsd: t.Union([Usd, t.Null()], { description: "Largest one-time grant the app may ask for; null: the service default (DEFAULT_MAX_GRANT_USD)." }),
  grantDailyCeilingUsd: t.Union([Usd, t.Null()], {
    description: "Most the app's grants may spend in one UTC day, together; null: the service default (GRANT_DAILY_CEILING_USD).",
  }),
};

const FundingSource = t.Union([t.Literal("app"), t.Literal("user")]);

const FundingSources = t.Array(FundingSource, {
  minItems: 1,
  description: "Who may pay the app's users' calls, as each user chooses: `app` (the operator's upstream key) and/or `user` (the user's own upstream account).",
});

export const AppView = t.Object({
  appId: t.String(),
  name: t.String(),
  origins: t.Array(t.String()),
  ...GrantLimits,
  fundingSources: FundingSources,
  createdAt: Time,
  disabledAt: TimeOrNull,
  keys: t.Array(AppKeyView, { description: "Every key the app was issued, revoked ones included; never a secret." }),
});

/** One app, as `app show` and GET /admin/apps/{appId} give it: the same as a listed app. */
export const AppDetailsView = AppView;

export const CreatedAppView = t.Object({
  appId: t.String(),
  secretKey: SecretKey,
  name: t.String(),
  origins: t.Array(t.String()),
  keyId: t.String(),
  maxGrantUsd: t.Optional(t.Number({ description: "Present when the app has its own largest grant." })),
  grantDailyCeilingUsd: t.Optional(t.Number({ description: "Present when the app has its own daily ceiling on grant dollars." })),
  fundingSources: t.Optional(t.Array(FundingSource, { description: "Present when the app's users may pay otherwise than with the operator's key alone." })),
});

export const UpdatedAppView = t.Object({ appId: t.String(), name: t.String(), origins: t.Array(t.String()), ...GrantLimits, fundingSources: FundingSources });

export const AppStateView = t.Object({ appId: t.String(), disabled: t.Boolean() });

export const KeyView = t.Object({ appId: t.String(), ...AppKeyView.properties });

export const IssuedKeyView = t.Object({ appId: t.String(), keyId: t.String(), secretKey: SecretKey });

export const RevokedKeyView = t.Object({ appId: t.String(), keyId: t.String(), revoked: t.Literal(true) });

const FundingStatus = t.Union([t.Literal("ok"), t.Literal("invalid")]);

const ConnectionFundingSource = t.Union([t.Literal("app"), t.Literal("user")], {
  description: "Who pays the user's calls: `app`, the operator's upstream key; `user`, the user's own upstream key.",
});

/** The user's linked key as the operator may see it: never the key. */
const LinkedUserKey = t.Union(
  [
    t.Object({
      fingerprint: t.String({ description: "`sha256:` and the first 12 hex digits of the key's SHA-256: tells keys apart, reveals nothing usable." }),
      linkedAt: Time,
    }),
    t.Null(),
  ],
  { description: "The user's own upstream key, when `fundingSource` is `user`; null otherwise." },
);

export const ConnectionView = t.Object({
  appUserId: t.String(),
  monthlyUsd: Usd,
  fundingStatus: FundingStatus,
  fundingSource: ConnectionFundingSource,
  connectedAt: Time,
  revokedAt: TimeOrNull,
});

export const ConnectionDetailsView = t.Object({
  appUserId: t.String(),
  monthlyUsd: Usd,
  usedUsd: t.Number({ description: "Settled spend in `period`, as recorded in the ledger." }),
  period: t.String({ description: "The current UTC month, YYYY-MM." }),
  fundingStatus: FundingStatus,
  fundingSource: ConnectionFundingSource,
  userKey: LinkedUserKey,
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
  source: UsageSourceView,
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

const EventTypes = t.Union([t.Array(t.String()), t.Literal("all")], { description: "The event types sent to it, or `all` (including types added later)." });

/** A webhook endpoint, never with its secret (shown once, by `webhook add`). */
export const WebhookEndpointView = t.Object({
  endpointId: t.String(),
  appId: t.String(),
  url: t.String(),
  events: EventTypes,
  createdAt: Time,
  disabledAt: TimeOrNull,
  disabledReason: t.Union([t.String(), t.Null()], { description: "`gone` (the receiver answered 410) or `operator`." }),
  secretState: t.Union([t.Literal("readable"), t.Literal("unreadable")], {
    description:
      "`unreadable`: the endpoint's signing secret does not open with the secrets keys of the process answering (sealed under a key it does not hold), " +
      "so its deliveries fail with `secret_unreadable`: give the servers the key that sealed it (SECRETS_KEY_PREVIOUS), or remove the endpoint and add it again.",
  }),
});

export const CreatedWebhookEndpointView = t.Object({
  ...WebhookEndpointView.properties,
  secret: t.String({ description: "`whsec_…`: the Standard Webhooks signing secret; shown only in this response." }),
});

export const RemovedWebhookEndpointView = t.Object({ endpointId: t.String(), removed: t.Literal(true) });

export const WebhookDeliveryView = t.Object({
  eventId: t.String({ description: "The `webhook-id` header: the same on every attempt." }),
  endpointId: t.String(),
  type: t.String(),
  state: t.Union([t.Literal("pending"), t.Literal("delivered"), t.Literal("failed")]),
  attempts: t.Integer(),
  nextAttemptAt: TimeOrNull,
  lastStatus: t.Union([t.Integer(), t.Null()]),
  lastError: t.Union([t.String(), t.Null()], {
    description:
      "Why the last attempt failed, as a class: `timeout`, `unreachable` (DNS, refused, reset, TLS), `address_refused` (not a public address), " +
      "`secret_unreadable` (the endpoint's signing secret does not open with the sending process's secrets keys; nothing was sent), `HTTP <status>`, or `endpoint disabled (gone|operator)`.",
  }),
  createdAt: Time,
  finishedAt: TimeOrNull,
});

export type WebhookEndpointView = Static<typeof WebhookEndpointView>;
export type CreatedWebhookEndpointView = Static<typeof CreatedWebhookEndpointView>;
export type RemovedWebhookEndpointView = Static<typeof RemovedWebhookEndpointView>;
export type WebhookDeliveryView = Static<typeof WebhookDeliveryView>;
