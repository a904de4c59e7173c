import type { SettleBarrier } from "../metering/meter";
import type { BudgetLedger } from "../budget/ledger";
import type { Clock } from "../clock";
import type { Config } from "../config";
import { ApiError } from "../errors";
import { nanoToUsd, periodAt } from "../money";
import { grantAccount } from "../budget/accounts";
import type { Grant, GrantRepository } from "../store/grants";
import type { App } from "../store/apps";
import type { BudgetTarget } from "../budget/target";

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

/** One-time grants for apps without a user system: redemption, status, revoke (consent: grant-consent.ts). */
export class GrantService {
  constructor(
    private readonly grants: GrantRepository,
    private readonly budget: Pick<BudgetLedger, "snapshot">,
    /** This process's settles under way: a grant's status waits for them, so it shows a call just answered. */
    private readonly settles: SettleBarrier,
    private readonly clock: Clock,
    private readonly config: Pick<Config, "grantDailyCeilingNano">,
  ) {}

  /** The grant behind a token, or 402 grant_invalid saying why it cannot be used. */
  async usableGrant(appId: string, token: string): Promise<Grant> {
    const grant = await this.known(appId, token);
    const reason = unusableReason(grant, this.clock.now());
    if (reason) throw new ApiError("grant_invalid", reason);
    return grant;
  }

  /** The budget a chat call with this grant draws on, and the app's daily ceiling; counts one use on admission. */
  async budgetTarget(app: App, token: string): Promise<BudgetTarget> {
    const appId = app.id;
    const grant = await this.usableGrant(appId, token);
    const now = this.clock.now();
    return {
      dailyGrantCeilingNano: app.grantDailyCeilingNano ?? this.config.grantDailyCeilingNano,
      account: grantAccount(grant.id),
      capNano: grant.usdCapNano,
      appId,
      appUserId: null,
      grantId: grant.id,
      period: periodAt(now),
      resetsAt: new Date(grant.expiresAt).toISOString(),
      // A grant's calls are paid by the operator's key: a refusal of it marks nothing here.
      payer: "app",
      markFundingInvalid: async () => {},
      admit: async () => {
        if (!(await this.grants.consumeUse(grant.id, this.clock.now()))) {
          const current = await this.grants.find(grant.id);
          throw new ApiError("grant_invalid", (current && unusableReason(current, this.clock.now())) ?? "the grant cannot be used");
        }
      },
    };
  }

  async view(appId: string, token: string): Promise<GrantView> {
    const grant = await this.known(appId, token);
    await this.settles.settled();
    const { spentNano, reservedNano } = await this.budget.snapshot(grantAccount(grant.id));
    const now = this.clock.now();
    const status =
      grant.revokedAt !== null
        ? "revoked"
        : grant.expiresAt <= now
          ? "expired"
          : grant.maxUses !== null && grant.uses >= grant.maxUses
            ? "exhausted"
            : "active";
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
    await this.grants.revoke((await this.known(appId, token)).id, this.clock.now());
  }

  /** Unknown tokens and other apps' tokens are both 402, with messages that say which. */
  private async known(appId: string, token: string): Promise<Grant> {
    const grant = /^gt_[0-9A-Za-z]{32,128}$/.test(token) ? await this.grants.findByToken(token) : null;
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
