import { Elysia, t } from "elysia";
import type { Guards } from "../../http/guards";
import type { OperatorService } from "../../services/operator";
import { AppDetailsView, AppStateView, AppView, CreatedAppView, IssuedKeyView, KeyView, RevokedKeyView, UpdatedAppView } from "../../services/operator/views";
import { adminDetail, adminErrors, AppParams } from "./shared";

const Origins = t.Array(t.String(), { description: "Browser origins (scheme, host and port; no path), allowed for sessions and the consent popup." });
const MaxGrantUsd = t.Union([t.Number(), t.Null()], {
  description:
    "Largest one-time grant the app may ask for, USD, from 0.000000001 (one nano-dollar) to 1000000; null: the service default (DEFAULT_MAX_GRANT_USD).",
});

const GrantDailyCeilingUsd = t.Union([t.Number(), t.Null()], {
  description:
    "Most the app's grants may spend in one UTC day, together, USD, from 0.000000001 (one nano-dollar) to 1000000; null: the service default (GRANT_DAILY_CEILING_USD).",
});

// Plain strings, judged by the operator service: a refusal then names the word, as the CLI's does.
const FundingSources = t.Array(t.String({ maxLength: 16 }), {
  maxItems: 8,
  description:
    "Who may pay the app's users' calls, as each user chooses: `app` (the operator's upstream key) and/or `user` (the user's own upstream account); at least one. Left out at creation: `[\"app\"]`.",
});

export const NewAppRequest = t.Object({
  name: t.String({ minLength: 1 }),
  origins: t.Optional(Origins),
  maxGrantUsd: t.Optional(MaxGrantUsd),
  grantDailyCeilingUsd: t.Optional(GrantDailyCeilingUsd),
  fundingSources: t.Optional(FundingSources),
});

export const AppUpdateRequest = t.Object(
  {
    name: t.Optional(t.String({ minLength: 1 })),
    origins: t.Optional(Origins),
    maxGrantUsd: t.Optional(MaxGrantUsd),
    grantDailyCeilingUsd: t.Optional(GrantDailyCeilingUsd),
    fundingSources: t.Optional(FundingSources),
  },
  { description: "The fields to change, at least one; `origins` and `fundingSources` replace their lists as a whole." },
);

const KeyParams = t.Object({ ...AppParams.properties, keyId: t.String({ maxLength: 64 }) });

/** /admin/apps: the operator's app and key commands (src/cli/commands.ts) over HTTP. */
export function adminAppRoutes(operator: OperatorService, auth: Guards) {
  return new Elysia({ prefix: "/apps" })
    .use(auth)
    .post(
      "",
      async ({ body, set }) => {
        set.status = 201;
        return operator.apps.create(body);
      },
      {
        adminToken: true,
        body: NewAppRequest,
        response: { 201: CreatedAppView, ...adminErrors(400, 413) },
        detail: adminDetail("Create an app with its first secret key", "The secret key is in this response only; the service keeps its hash."),
      },
    )
    .get("", async () => ({ data: await operator.apps.list() }), {
      adminToken: true,
      response: { 200: t.Object({ data: t.Array(AppView) }), ...adminErrors() },
      detail: adminDetail("Every app, with its key ids (no secrets)"),
    })
    .get("/:appId", async ({ params }) => operator.apps.show(params.appId), {
      adminToken: true,
      params: AppParams,
      response: { 200: AppDetailsView, ...adminErrors() },
      detail: adminDetail("One app, with its key ids and largest grant"),
    })
    .patch("/:appId", async ({ params, body }) => operator.apps.update(params.appId, body), {
      adminToken: true,
      params: AppParams,
      body: AppUpdateRequest,
      response: { 200: UpdatedAppView, ...adminErrors(400, 413) },
      detail: adminDetail("Change an app's name, origins, grant limits or funding sources"),
    })
    .post("/:appId/disable", async ({ params }) => operator.apps.disable(params.appId), {
      adminToken: true,
      params: AppParams,
      response: { 200: AppStateView, ...adminErrors() },
      detail: adminDetail("Disable an app: its keys and sessions are refused at once, its data is kept"),
    })
    .post("/:appId/enable", async ({ params }) => operator.apps.enable(params.appId), {
      adminToken: true,
      params: AppParams,
      response: { 200: AppStateView, ...adminErrors() },
      detail: adminDetail("Enable a disabled app again"),
    })
    .get("/:appId/keys", async ({ params }) => ({ data: await operator.keys.list(params.appId) }), {
      adminToken: true,
      params: AppParams,
      response: { 200: t.Object({ data: t.Array(KeyView) }), ...adminErrors() },
      detail: adminDetail("An app's keys: ids and dates, revoked ones included, no secrets"),
    })
    .post(
      "/:appId/keys",
      async ({ params, set }) => {
        set.status = 201;
        return operator.keys.rotate(params.appId);
      },
      {
        adminToken: true,
        params: AppParams,
        response: { 201: IssuedKeyView, ...adminErrors() },
        detail: adminDetail("Issue a new key (rotation)", "Older keys stay valid until revoked. The secret key is in this response only."),
      },
    )
    .delete("/:appId/keys/:keyId", async ({ params }) => operator.keys.revoke(params.appId, params.keyId), {
      adminToken: true,
      params: KeyParams,
      response: { 200: RevokedKeyView, ...adminErrors() },
      detail: adminDetail("Revoke one key, on every instance at once", "404 when the app has no such active key."),
    });
}
