import type { Clock } from "../clock";
import { ApiError, type BudgetErrorDetails } from "../errors";
import { nanoToUsd, periodAt } from "../money";
import { userAccount } from "../budget/accounts";
import type { BudgetTarget } from "../budget/target";
import type { BudgetSnapshot } from "../budget/ledger";
import type { Payer } from "../request/payer";
import type { App } from "../store/apps";
import type { ConnectionRepository } from "../store/connections";

/** Finds the budget a chat call draws on from who pays: its user's connection, or its grant. */
export class PayerBudgets {
  constructor(
    private readonly connections: ConnectionRepository,
    private readonly grants: { budgetTarget(app: App, grantToken: string): Promise<BudgetTarget> },
    private readonly clock: Clock,
  ) {}

  /** The payer's budget, or 400 when the request names no payer or two, 402 when it cannot pay. */
  async targetOf(app: App, payer: Payer): Promise<BudgetTarget> {
    const who = payer.required();
    if (who.kind === "grant") return this.grants.budgetTarget(app, who.grantToken);
    return userBudgetTarget(this.connections, this.clock, app.id, who.appUserId);
  }
}

/** The user's monthly budget, or 402 when the user is not connected or funding is invalid. */
export async function userBudgetTarget(connections: ConnectionRepository, clock: Clock, appId: string, appUserId: string): Promise<BudgetTarget> {
  const connection = await connections.findActive(appId, appUserId);
  if (!connection) throw new ApiError("not_connected", `user ${JSON.stringify(appUserId)} has not approved a budget for this app`);
  if (connection.fundingStatus === "invalid") {
    throw new ApiError("funding_invalid", "the upstream refused payment for this user's requests; the user must approve again");
  }
  const period = periodAt(clock.now());
  return {
    account: userAccount(appId, period.id, appUserId),
    capNano: connection.monthlyCapNano,
    appId,
    appUserId,
    grantId: null,
    period,
    resetsAt: period.end,
    // The connection's funding source says whose key pays: the operator's, or the user's own.
    payer: connection.fundingSource,
    markFundingInvalid: () => connections.markFundingInvalid(appId, appUserId, clock.now()),
    ...(connection.fundingSource === "user" && { openUserKey: () => connections.userUpstreamKey(appId, appUserId) }),
  };
}

/** 402 budget_exceeded (grant_invalid for a grant) with what a program needs to act on it. */
export function budgetExceeded(target: BudgetTarget, counters: BudgetSnapshot & { frozen?: true }): ApiError {
  const code = target.grantId ? "grant_invalid" : "budget_exceeded";
  return new ApiError(code, refusalMessage(target, counters.frozen === true), { ...budgetFigures(target, counters) });
}

/** A budget's figures as its refusals carry them (ARCHITECTURE.md §3 "Errors"). */
export function budgetFigures(target: BudgetTarget, counters: BudgetSnapshot & { frozen?: true }): BudgetErrorDetails {
  const remaining = counters.frozen ? 0 : Math.max(0, target.capNano - counters.spentNano - counters.reservedNano);
  return { limitUsd: nanoToUsd(target.capNano), usedUsd: nanoToUsd(counters.spentNano), remainingUsd: nanoToUsd(remaining), resetsAt: target.resetsAt };
}

function refusalMessage(target: BudgetTarget, frozen: boolean): string {
  const budget = target.grantId ? "grant" : "budget";
  if (frozen) {
    const until = target.grantId ? "" : " until the period resets or the cap is raised";
    return `an earlier call cost more than it reserved (the upstream billed above its listed price), so this ${budget} admits nothing more${until}`;
  }
  return target.grantId
    ? "the grant's cap is used up: it does not cover even a minimal completion of this request"
    : "the budget does not cover even a minimal completion of this request";
}
