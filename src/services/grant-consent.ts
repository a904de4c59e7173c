import type { Clock } from "../clock";
import type { Config } from "../config";
import { ApiError } from "../errors";
import { formatUsd, nanoToUsd, ONE_NANO_USD, usdAmountToNano } from "../money";
import type { App, AppRepository } from "../store/apps";
import type { GrantRepository } from "../store/grants";

export const DEFAULT_GRANT_TTL_SECONDS = 24 * 60 * 60;
export const MAX_GRANT_TTL_SECONDS = 30 * 24 * 60 * 60;
/** How long a consent page's anti-forgery token can be used; the purge deletes it after. */
export const CONSENT_LIFETIME_MS = 10 * 60 * 1000;

/** A consent request that cannot be shown: an error page with this status, never a token. */
export class ConsentError extends Error {
  constructor(
    message: string,
    readonly status: 400 | 402 | 429 = 400,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export interface ConsentParams {
  appId?: string;
  usd?: string;
  origin?: string;
  maxUses?: string;
  ttl?: string;
  state?: string;
}

/** What a consent page asks for, checked but not yet recorded. */
export interface ConsentDraft {
  app: App;
  usd: number;
  /** `usd` as the grant's cap in nano-dollars. */
  usdCapNano: number;
  maxUses: number | null;
  ttlSeconds: number;
  origin: string;
  state: string;
}

/** A recorded consent request: what the page shows, pinned behind its one-time token. */
export interface ConsentOffer extends ConsentDraft {
  expiresAt: number;
  consentToken: string;
}

/**
 * The consent popup's two steps for apps without a user system: showing a request (its
 * parameters checked) and approving it (the grant created). Neither touches the app's
 * daily ceiling: that counts what grants spend, enforced when a call reserves
 * (src/services/chat-reservation.ts), so an approval nobody spends costs the app nothing
 * and approvals scripted by strangers cannot use the ceiling up.
 */
export class ConsentService {
  constructor(
    private readonly apps: AppRepository,
    private readonly grants: GrantRepository,
    private readonly clock: Clock,
    private readonly config: Pick<Config, "defaultMaxGrantUsd" | "grantDailyCeilingNano">,
  ) {}

  /** Checks a consent page's parameters; records nothing. */
  async draft(params: ConsentParams): Promise<ConsentDraft> {
    const app = params.appId ? await this.apps.find(params.appId) : null;
    if (!app || app.disabledAt !== null) throw new ConsentError("This app is unknown or no longer active.");
    if (!params.origin || !app.origins.includes(params.origin)) {
      throw new ConsentError("The page asking for this grant is not one of the app's registered origins.");
    }
    const usd = params.usd ? Number(params.usd) : Number.NaN;
    const maxUsd = app.maxGrantNano !== null ? nanoToUsd(app.maxGrantNano) : this.config.defaultMaxGrantUsd;
    if (usd > maxUsd) throw new ConsentError(`This app may ask for at most $${maxUsd} at a time.`);
    // Rounded down, as every cap: a grant never holds more than the user saw.
    const usdCapNano = usdAmountToNano(
      usd,
      { rounding: "floor" },
      () => new ConsentError(`The amount must be a number of dollars greater than 0 (at least $${ONE_NANO_USD}).`),
    );
    const maxUses = params.maxUses ? Number(params.maxUses) : null;
    if (maxUses !== null && (!Number.isSafeInteger(maxUses) || maxUses < 1)) throw new ConsentError("maxUses must be a whole number of at least 1.");
    const ttlSeconds = params.ttl ? Number(params.ttl) : DEFAULT_GRANT_TTL_SECONDS;
    if (!Number.isSafeInteger(ttlSeconds) || ttlSeconds < 60 || ttlSeconds > MAX_GRANT_TTL_SECONDS) {
      throw new ConsentError(`ttl must be a whole number of seconds from 60 to ${MAX_GRANT_TTL_SECONDS} (30 days).`);
    }
    const state = params.state ?? "";
    if (state.length > 512) throw new ConsentError("state is too long (512 characters at most).");
    return { app, usd, usdCapNano, maxUses, ttlSeconds, origin: params.origin, state };
  }

  /**
   * Records the request behind a one-time token that the page embeds, unless the grant is
   * larger than the app's whole daily ceiling: then no day could let all of it be spent at once.
   */
  async offer(draft: ConsentDraft): Promise<ConsentOffer> {
    const now = this.clock.now();
    const { usdCapNano } = draft;
    const ceilingNano = draft.app.grantDailyCeilingNano ?? this.config.grantDailyCeilingNano;
    if (usdCapNano > ceilingNano) {
      const [ceiling, requested] = [ceilingNano, usdCapNano].map((nano) => formatUsd(nanoToUsd(nano)));
      throw new ConsentError(`Grants of ${draft.app.name} may spend at most ${ceiling} a day, and this ${requested} grant is larger than that.`, 402);
    }
    const { app, maxUses, ttlSeconds, origin, state } = draft;
    const consentToken = await this.grants.createConsentRequest({ appId: app.id, usdCapNano, maxUses, ttlSeconds, origin, state }, now, CONSENT_LIFETIME_MS);
    return { ...draft, expiresAt: now + ttlSeconds * 1000, consentToken };
  }

  /** The user approved: consume the consent token and create the grant. */
  async approve(consentToken: string) {
    const approval = await this.grants.approveConsent(consentToken, this.clock.now());
    // The page was shown while the app was active; an operator may have disabled it since.
    // Its grant could not be spent now, but would be the day the app is enabled again.
    if (approval.kind === "app_disabled") throw new ApiError("invalid_request", "this app is no longer active; no grant was created");
    if (approval.kind === "unusable") throw new ApiError("invalid_request", "this consent page has expired or was already used; open it again");
    const { grant, grantToken, state } = approval;
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
    return this.grants.consentAppId(consentToken);
  }
}
