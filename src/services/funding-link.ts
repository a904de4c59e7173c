/**
 * Linking a user's own upstream account to their connection, through the upstream's OAuth
 * PKCE flow (RFC 7636; the spec's `/auth` page and `POST /auth/keys`), run by the service on
 * its own origin so the app never sees the verifier nor the key:
 *
 * 1. start: the session's user asks to pay with their own account, for a cap. A pending flow
 *    is stored (src/store/funding-flows.ts: the state's hash, the sealed verifier, the
 *    session that started it, the cap) and the user is sent to the upstream's page with the
 *    S256 challenge and the cap as the new key's monthly credit limit, so the upstream
 *    enforces the cap a second time.
 * 2. complete: the upstream sends the browser back with the state and a code (or
 *    `error=access_denied`). The flow is taken once, by the session that started it; the code
 *    is exchanged with its verifier, and the key is linked in one store call that sets the
 *    cap, the source `user` and the sealed key, with the approval's webhook event.
 *
 * The key goes from the exchange's answer to the store's sealing and nowhere else: no log
 * line, answer or page carries it, only its fingerprint.
 */
import { createHash, randomBytes } from "node:crypto";
import type { Clock } from "../clock";
import type { Logger } from "../logger";
import { nanoToUsd } from "../money";
import type { AppRepository } from "../store/apps";
import type { ConnectionRepository } from "../store/connections";
import type { FundingFlowRepository } from "../store/funding-flows";
import { AuthCodeRefused, type UpstreamClient } from "../upstream/client";
import type { SessionClaims } from "../auth/session-token";
import type { ConnectionService, ConnectionStatusView } from "./connections";

/** How long a user has on the upstream's page: the upstream's own codes live as long. */
export const FUNDING_FLOW_LIFETIME_MS = 10 * 60_000;

export type FundingLinkResult =
  | { outcome: "connected"; appId: string; status: ConnectionStatusView; keyFingerprint: string }
  | { outcome: "denied"; appId: string }
  | { outcome: "failed"; httpStatus: 400 | 502; message: string };

export interface FundingLinkSettings {
  /** The public URL of the callback route (PUBLIC_URL + its path); the state is added to its query. */
  callbackUrl: string;
  /** The upstream's PKCE page (Config.upstreamAuthUrl). */
  upstreamAuthUrl: string;
}

const NOTHING_CHANGED = "Nothing was changed; start again from the app.";

export class FundingLinkService {
  constructor(
    private readonly connections: ConnectionService,
    private readonly repository: Pick<ConnectionRepository, "findActive" | "approve">,
    private readonly flows: Pick<FundingFlowRepository, "create" | "take">,
    private readonly apps: Pick<AppRepository, "find">,
    private readonly upstream: Pick<UpstreamClient, "exchangeAuthCode">,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly settings: FundingLinkSettings,
  ) {}

  /** Starts a flow for the session's user; the URL of the upstream's page to send them to. */
  async start(session: SessionClaims, monthlyUsd: number | undefined): Promise<{ authorizeUrl: string }> {
    const { appId, appUserId } = session;
    await this.connections.requireFundingSource(appId, "user");
    const capNano = this.connections.capNano(session, monthlyUsd, await this.repository.findActive(appId, appUserId));
    // RFC 7636 §4.1: 32 random bytes, base64url (43 characters); §4.2: the S256 challenge.
    const codeVerifier = randomBytes(32).toString("base64url");
    const challenge = createHash("sha256").update(codeVerifier).digest("base64url");
    const flow = { appId, appUserId, sessionId: session.jti, codeVerifier, monthlyCapNano: capNano };
    const state = await this.flows.create(flow, this.clock.now(), FUNDING_FLOW_LIFETIME_MS);
    const url = new URL(this.settings.upstreamAuthUrl);
    url.searchParams.set("callback_url", `${this.settings.callbackUrl}?state=${encodeURIComponent(state)}`);
    url.searchParams.set("code_challenge", challenge);
    url.searchParams.set("code_challenge_method", "S256");
    url.searchParams.set("limit", String(nanoToUsd(capNano)));
    url.searchParams.set("usage_limit_type", "monthly");
    return { authorizeUrl: url.toString() };
  }

  /**
   * The upstream's redirect back: `code` on approval, `error` on refusal. `sessionId` is the
   * session the browser started a flow from (null: none), which must be the flow's own.
   * Every outcome is a result for the page, never a throw, but a failure of the store.
   */
  async complete(callback: { state?: string; code?: string; error?: string }, sessionId: string | null): Promise<FundingLinkResult> {
    const flow = callback.state ? await this.flows.take(callback.state, sessionId ?? "", this.clock.now()) : null;
    if (!flow) {
      return failed(400, `This link has expired, was already used, or was started in another browser session. ${NOTHING_CHANGED}`);
    }
    const { appId, appUserId } = flow;
    if (callback.error !== undefined) return { outcome: "denied", appId };
    if (!callback.code) return failed(400, `The upstream sent no authorization code. ${NOTHING_CHANGED}`);
    // Checked again before a key is made: the app may have been disabled, or its users' own
    // funding turned off, while the user was on the upstream's page.
    const app = await this.apps.find(appId);
    if (!app || app.disabledAt !== null) return failed(400, `This app is unknown or no longer active. ${NOTHING_CHANGED}`);
    if (!app.fundingSources.includes("user")) return failed(400, `This app no longer lets its users pay with their own account. ${NOTHING_CHANGED}`);

    let upstreamKey: string;
    try {
      upstreamKey = await this.upstream.exchangeAuthCode(callback.code, flow.codeVerifier);
    } catch (err) {
      if (err instanceof AuthCodeRefused) {
        this.logger.warn("funding link refused by the upstream", { appId, appUserId, status: err.status, reason: err.upstreamMessage });
        return failed(400, `The upstream did not accept this approval (HTTP ${err.status}). ${NOTHING_CHANGED}`);
      }
      this.logger.warn("funding link: the upstream did not answer the code exchange", { appId, appUserId, reason: errorText(err) });
      return failed(502, `The upstream could not be reached to finish the link. ${NOTHING_CHANGED}`);
    }
    const connection = await this.repository.approve(appId, appUserId, flow.monthlyCapNano, this.clock.now(), { source: "user", upstreamKey });
    const keyFingerprint = connection.userKey?.fingerprint ?? "";
    this.logger.info("funding linked", { appId, appUserId, keyFingerprint });
    return { outcome: "connected", appId, status: await this.connections.connectionStatus(appId, appUserId), keyFingerprint };
  }
}

const failed = (httpStatus: 400 | 502, message: string): FundingLinkResult => ({ outcome: "failed", httpStatus, message });

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));
