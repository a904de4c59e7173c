/**
 * `@metered-proxy/client/browser`: the library for an app's page, which holds no secret
 * (README "Client library"). It asks the app's own backend for the user's 10-minute session
 * token when it needs one, reads and revokes the user's connection with it, and opens the
 * service's hosted pages: the connect page (approve, lower or revoke a monthly cap) and the
 * one-time grant consent page. Every failure the service answers is thrown as a ProxyError.
 */
import { errorFromResponse } from "./envelope.js";
import { apiBaseOf, reach, type FetchLike } from "./http.js";
import { popupFlow } from "./popup.js";
import type { ConnectionStatus } from "./types.js";

export interface BrowserClientOptions {
  /** The service's address, e.g. `https://proxy.example.com` (the API is under its `/api/v1`). */
  baseUrl: string;
  appId: string;
  /** A fresh session token from the app's backend, which mints it with `createSession` (server entry). */
  getSessionToken: () => Promise<string>;
  /** A `fetch` to use instead of the global one. */
  fetch?: FetchLike;
}

/**
 * What the user did on the connect page. `connected` says who pays: `app`, your operator's
 * upstream account; `user`, the user's own, linked through the upstream's page.
 */
export type ConnectOutcome =
  { type: "connected"; monthlyUsd: number; resetsAt: string; fundingSource: FundingSource } | { type: "revoked" } | { type: "connect_cancelled" };

/** Who pays a user's calls (README "Client library"); the app's settings say which its users may choose. */
export type FundingSource = "app" | "user";

export interface ConnectOptions {
  /** The monthly cap to ask for, USD; the user may approve less. */
  monthlyUsd?: number;
  /**
   * Who pays, preselected on the page: `user` offers "pay with my own upstream account" first
   * (the page then opens the upstream's page to link the account). The app must allow it
   * (`app create|update --funding-sources app,user`), or the page shows an error.
   */
  funding?: FundingSource;
}

/** A one-time grant, for the app's backend to send as `x-service-grant` (its id and status: GET /grants/current). */
export interface Grant {
  grantToken: string;
  usd: number;
  maxUses: number | null;
  expiresAt: string;
  state: string;
}

export interface RequestGrantInput {
  /** The most the grant may spend, USD. */
  usd: number;
  maxUses?: number;
  /** Seconds until the grant expires (60 to 30 days; default a day). */
  ttl?: number;
  /** Echoed back, to tie the answer to the request. */
  state?: string;
}

/** The user chose Deny on the consent page. */
export class GrantDeniedError extends Error {
  constructor() {
    super("the user denied the grant");
    this.name = "GrantDeniedError";
  }
}

export interface BrowserClient {
  /** Opens the hosted connect page (call it from a click); resolves with what the user did there. */
  connect(options?: ConnectOptions): Promise<ConnectOutcome>;
  /** GET /connections: the user's connection, cap and spend. */
  getConnection(): Promise<ConnectionStatus>;
  /** DELETE /connections: revoke; the app's calls for this user are refused at once. */
  revoke(): Promise<void>;
  /** Opens the one-time grant consent page (call it from a click); resolves with the grant, or rejects with GrantDeniedError. */
  requestGrant(input: RequestGrantInput): Promise<Grant>;
}

export function createBrowserClient(options: BrowserClientOptions): BrowserClient {
  if (typeof window === "undefined") throw new Error("@metered-proxy/client/browser runs in a browser page; on a server use @metered-proxy/client/server");
  const apiBase = apiBaseOf(options.baseUrl);
  const serviceOrigin = new URL(apiBase).origin;
  const send: FetchLike = options.fetch ?? ((input, init) => fetch(input, init));

  const connections = async (method: "GET" | "DELETE"): Promise<Response> => {
    const token = await options.getSessionToken();
    // No cookies: the session token is the only credential, so no other site can ride on it.
    const init: RequestInit = { method, credentials: "omit", headers: { authorization: `Bearer ${token}` } };
    const hint = `Is the service running at the baseUrl given to createBrowserClient, and is this page's origin (${window.location.origin}) one the app registered (--origin)? A browser reports a refused origin (CORS) the same way.`;
    const response = await reach(send, `${apiBase}/connections`, init, hint);
    if (!response.ok) throw await errorFromResponse(response);
    return response;
  };

  return {
    connect({ monthlyUsd, funding } = {}) {
      const query = new URLSearchParams({ appId: options.appId, origin: window.location.origin });
      if (monthlyUsd !== undefined) query.set("monthlyUsd", String(monthlyUsd));
      if (funding !== undefined) query.set("funding", funding);
      return popupFlow<ConnectOutcome>(`${apiBase}/connect?${query}`, serviceOrigin, async (data, popup) => {
        if (data.type === "connect_ready") {
          // The token goes to the service's origin only, never to whatever else the popup shows.
          popup.postMessage({ type: "session", token: await options.getSessionToken() }, serviceOrigin);
          return undefined;
        }
        if (data.type === "connected" || data.type === "revoked" || data.type === "connect_cancelled") return data as ConnectOutcome;
        return undefined;
      });
    },
    async getConnection() {
      return (await (await connections("GET")).json()) as ConnectionStatus;
    },
    async revoke() {
      await connections("DELETE");
    },
    requestGrant({ usd, maxUses, ttl, state = "" }) {
      const query = new URLSearchParams({ appId: options.appId, usd: String(usd), origin: window.location.origin, state });
      if (maxUses !== undefined) query.set("maxUses", String(maxUses));
      if (ttl !== undefined) query.set("ttl", String(ttl));
      return popupFlow<Grant>(`${apiBase}/grants/consent?${query}`, serviceOrigin, (data) => {
        if (data.type === "grant_denied") throw new GrantDeniedError();
        if (data.type === "grant") {
          const { type: _type, ...grant } = data;
          return grant as unknown as Grant;
        }
        return undefined;
      });
    },
  };
}

export { PopupClosedError } from "./popup.js";
export type { ConnectionStatus, Period, UpstreamCredit, UserStatus } from "./types.js";
export { toProxyError } from "./envelope.js";
export {
  AuthError,
  BudgetExceededError,
  ERROR_CODES,
  FundingInvalidError,
  GrantInvalidError,
  InvalidRequestError,
  NotConnectedError,
  ProxyError,
  ProxyUnreachableError,
  RateLimitedError,
  UnavailableError,
  UnexpectedResponseError,
  type BudgetDetails,
  type ErrorCode,
} from "./errors.js";
