import { Elysia, t } from "elysia";
import type { App, AppRepository } from "../store/apps";
import type { FundingSource } from "../store/connections";
import { consentHeaders } from "../pages/consent-page";
import { renderConnectError, renderConnectPage, type ConnectOffer } from "../pages/connect-page";
import { randomString } from "../random";
import { ONE_NANO_USD, usdAmountToNano } from "../money";

const ConnectQuery = t.Object(
  {
    appId: t.Optional(t.String({ maxLength: 64 })),
    origin: t.Optional(t.String({ maxLength: 512 })),
    monthlyUsd: t.Optional(t.String({ maxLength: 32 })),
    funding: t.Optional(t.String({ maxLength: 16 })),
  },
  { additionalProperties: true },
);

const htmlPage = (description: string) => ({ description, content: { "text/html": { schema: { type: "string" as const } } } });

/** A connect request that cannot be shown: rendered as an error page, never as the page. */
class ConnectRefusal extends Error {}

/** Checks what the page is opened with: a live app, one of its registered origins, a sane cap. */
async function offerFor(
  apps: AppRepository,
  maxUsd: number,
  query: { appId?: string; origin?: string; monthlyUsd?: string; funding?: string },
): Promise<ConnectOffer> {
  const app = query.appId ? await apps.find(query.appId) : null;
  if (!app || app.disabledAt !== null) throw new ConnectRefusal("This app is unknown or no longer active.");
  if (!query.origin || !app.origins.includes(query.origin)) {
    throw new ConnectRefusal("The page asking for this connection is not one of the app's registered origins.");
  }
  let requestedUsd: number | null = null;
  if (query.monthlyUsd !== undefined && query.monthlyUsd !== "") {
    requestedUsd = Number(query.monthlyUsd);
    if (requestedUsd > maxUsd) throw new ConnectRefusal(`The monthly amount may be at most $${maxUsd}.`);
    usdAmountToNano(
      requestedUsd,
      { rounding: "floor" },
      () => new ConnectRefusal(`The monthly amount must be a number of dollars greater than 0 (at least $${ONE_NANO_USD}).`),
    );
  }
  return { app, origin: query.origin, requestedUsd, maxUsd, funding: fundingAsked(app, query.funding) };
}

/** The funding source the app preselects: one it allows, or none named. */
function fundingAsked(app: App, funding: string | undefined): FundingSource | null {
  if (funding === undefined || funding === "") return null;
  if (!app.fundingSources.includes(funding as FundingSource)) {
    throw new ConnectRefusal(
      funding === "user" ? "This app does not let its users pay with their own upstream account." : `Unknown funding source: ${funding}.`,
    );
  }
  return funding as FundingSource;
}

/**
 * GET /connect: the hosted page where a user approves, lowers or revokes an app's monthly
 * cap (src/pages/connect-page.ts says how it gets the session token and why that is safe).
 * It writes nothing, so it needs no rate limit of its own; the calls it makes are the
 * /connections ones, with their own auth.
 */
export function connectRoutes(apps: AppRepository, maxMonthlyUsd: number) {
  return new Elysia().get(
    "/connect",
    async ({ query, set }) => {
      const nonce = randomString(24);
      Object.assign(set.headers, consentHeaders(nonce));
      try {
        return renderConnectPage(await offerFor(apps, maxMonthlyUsd, query), nonce);
      } catch (err) {
        if (!(err instanceof ConnectRefusal)) throw err;
        set.status = 400;
        return renderConnectError(err.message, nonce);
      }
    },
    {
      query: ConnectQuery,
      detail: {
        tags: ["connections"],
        summary: "The hosted connect page (HTML)",
        security: [],
        description:
          "Opened by the app's browser code with `appId`, `origin` (the opener's, registered for the app) and optionally " +
          "`monthlyUsd` (the cap asked for) and `funding` (`app` or `user`: who pays, preselected; one the app allows). The opener hands it the user's session token by postMessage once the page " +
          'posts `{type: "connect_ready"}`; the page answers `{type: "connected", monthlyUsd, resetsAt, fundingSource}`, `{type: "revoked"}` ' +
          'or `{type: "connect_cancelled"}`. Bad parameters render an error page.',
        responses: { 200: htmlPage("The connect page."), 400: htmlPage("An error page.") },
      },
    },
  );
}
