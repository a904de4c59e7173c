import type { Deps } from "../deps";
import { ApiError } from "../errors";
import { nanoToUsd, periodAt, usdToNanoFloor } from "../money";
import { grantAccount } from "../metering/accounts";
import type { App } from "../store/apps";
import type { Grant } from "../store/grants";
import type { BudgetTarget } from "./budget-target";

export const DEFAULT_GRANT_TTL_SECONDS = 24 * 60 * 60;
export const MAX_GRANT_TTL_SECONDS = 30 * 24 * 60 * 60;
/** How long a consent page's anti-forgery token can be used. */
const CONSENT_LIFETIME_MS = 10 * 60 * 1000;

/** A consent request that failed validation: shown as an error page, never as a token. */
export class ConsentError extends Error {}

export interface ConsentParams {
  appId?: string;
  usd?: string;
  origin?: string;
  maxUses?: string;
  ttl?: string;
  state?: string;
}

export interface ConsentOffer {
  app: App;
  usd: number;
  maxUses: number | null;
  ttlSeconds: number;
  origin: string;
  state: string;
  expiresAt: number;
  consentToken: string;
}

export interface GrantView {
  grantId: string;
  usdCap: number;
  usedUsd: number;
  remainingUsd: number;
  uses: number;
  maxUses: number | null;
  expiresAt: string;
  status: "active" | "expired" | "revoked" | "exhausted";
}

/** One-time grants for apps without a user system: consent, redemption, status, revoke. */
export class GrantService {
  constructor(private readonly deps: Deps) {}

  /** Validates a consent page's parameters and pins them behind a one-time token. */
  async offer(params: ConsentParams): Promise<ConsentOffer> {
    const app = params.appId ? await this.deps.store.apps.find(params.appId) : null;
    if (!app || app.disabledAt !== null) throw new ConsentError("This app is unknown or no longer active.");
    if (!params.origin || !app.origins.includes(params.origin)) {
      throw new ConsentError("The page asking for this grant is not one of the app's registered origins.");
    }
    const usd = Number(params.usd);
    const maxUsd = app.maxGrantNano !== null ? nanoToUsd(app.maxGrantNano) : this.deps.config.defaultMaxGrantUsd;
    if (!params.usd || !Number.isFinite(usd) || usd <= 0) throw new ConsentError("The amount must be a number of dollars greater than 0.");
    if (usd > maxUsd) throw new ConsentError(`This app may ask for at most $${maxUsd} at a time.`);
    const maxUses = params.maxUses ? Number(params.maxUses) : null;
    if (maxUses !== null && (!Number.isSafeInteger(maxUses) || maxUses < 1)) throw new ConsentError("maxUses must be a whole number of at least 1.");
    const ttlSeconds = params.ttl ? Number(params.ttl) : DEFAULT_GRANT_TTL_SECONDS;
    if (!Number.isSafeInteger(ttlSeconds) || ttlSeconds < 60 || ttlSeconds > MAX_GRANT_TTL_SECONDS) {
      throw new ConsentError(`ttl must be a whole number of seconds from 60 to ${MAX_GRANT_TTL_SECONDS} (30 days).`);
    }
    const state = params.state ?? "";
    if (state.length > 512) throw new ConsentError("state is too long (512 characters at most).");
    const now = this.deps.clock.now();
    const consentToken = await this.deps.store.grants.createConsentRequest(
      { appId: app.id, usdCapNano: usdToNanoFloor(usd), maxUses, ttlSeconds, origin: params.origin, state },
      now,
      CONSENT_LIFETIME_MS,
    );
    return { app, usd, maxUses, ttlSeconds, origin: params.origin, state, expiresAt: now + ttlSeconds * 1000, consentToken };
  }

  /** The user approved: consume the consent token and create the grant. */
  async approve(consentToken: string) {
    const approved = await this.deps.store.grants.approveConsent(consentToken, this.deps.clock.now());
    if (!approved) throw new ApiError("invalid_request", "this consent page has expired or was already used; open it again");
    const { grant, grantToken, state } = approved;
    return {
      type: "grant" as const,
      grantToken,
      grantId: grant.id,
      usd: nanoToUsd(grant.usdCapNano),
      maxUses: grant.maxUses,
      expiresAt: new Date(grant.expiresAt).toISOString(),
      state,
      origin: grant.origin,
    };
  }

  /** The app id a consent token belongs to, for per-app rate limiting before approval. */
  appOfConsent(consentToken: string): Promise<string | null> {
    return this.deps.store.grants.consentAppId(consentToken);
  }

  /** The grant behind a token, or 402 grant_invalid saying why it cannot be used. */
  async usableGrant(appId: string, token: string): Promise<Grant> {
    const grant = await this.known(appId, token);
    const reason = unusableReason(grant, this.deps.clock.now());
    if (reason) throw new ApiError("grant_invalid", reason);
    return grant;
  }

  /** The budget a chat call with this grant draws on; counts one use on admission. */
  async budgetTarget(appId: string, token: string): Promise<BudgetTarget> {
    const grant = await this.usableGrant(appId, token);
    const now = this.deps.clock.now();
    return {
      account: grantAccount(grant.id),
      capNano: grant.usdCapNano,
      appId,
      appUserId: null,
      grantId: grant.id,
      period: periodAt(now),
      resetsAt: new Date(grant.expiresAt).toISOString(),
      markFundingInvalid: async () => {},
      admit: async () => {
        if (!(await this.deps.store.grants.consumeUse(grant.id, this.deps.clock.now()))) {
          const current = await this.deps.store.grants.find(grant.id);
          throw new ApiError("grant_invalid", (current && unusableReason(current, this.deps.clock.now())) ?? "the grant cannot be used");
        }
      },
    };
  }

  async view(appId: string, token: string): Promise<GrantView> {
    const grant = await this.known(appId, token);
    const { spentNano, reservedNano } = await this.deps.budget.snapshot(grantAccount(grant.id));
    const now = this.deps.clock.now();
    const status =
      grant.revokedAt !== null ? "revoked" : grant.expiresAt <= now ? "expired" : grant.maxUses !== null && grant.uses >= grant.maxUses ? "exhausted" : "active";
    return {
      grantId: grant.id,
      usdCap: nanoToUsd(grant.usdCapNano),
      usedUsd: nanoToUsd(spentNano),
      remainingUsd: status === "active" ? nanoToUsd(Math.max(0, grant.usdCapNano - spentNano - reservedNano)) : 0,
      uses: grant.uses,
      maxUses: grant.maxUses,
      expiresAt: new Date(grant.expiresAt).toISOString(),
      status,
    };
  }

  async revoke(appId: string, token: string): Promise<void> {
    await this.deps.store.grants.revoke((await this.known(appId, token)).id, this.deps.clock.now());
  }

  /** Unknown tokens and other apps' tokens are both 402, with messages that say which. */
  private async known(appId: string, token: string): Promise<Grant> {
    const grant = /^gt_[0-9A-Za-z]{32,128}$/.test(token) ? await this.deps.store.grants.findByToken(token) : null;
    // Another app's token gets the same answer as an unknown one: it must not confirm that a token exists.
    if (!grant || grant.appId !== appId) throw new ApiError("grant_invalid", "unknown grant token");
    return grant;
  }
}

function unusableReason(grant: Grant, now: number): string | null {
  if (grant.revokedAt !== null) return "the grant was revoked";
  if (grant.expiresAt <= now) return `the grant expired at ${new Date(grant.expiresAt).toISOString()}`;
  if (grant.maxUses !== null && grant.uses >= grant.maxUses) return `the grant is fully used (${grant.uses} of ${grant.maxUses} uses)`;
  return null;
}
