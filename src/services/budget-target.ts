import type { Deps } from "../deps";
import { ApiError, type BudgetErrorDetails } from "../errors";
import { nanoToUsd, periodAt } from "../money";
import { userAccount } from "../budget/accounts";
import type { BudgetTarget } from "../budget/target";
import type { BudgetSnapshot } from "../metering/budget-ledger";

/** The user's monthly budget, or 402 when the user is not connected or funding is invalid. */
export async function userBudgetTarget(deps: Deps, appId: string, appUserId: string): Promise<BudgetTarget> {
  const connection = await deps.store.connections.findActive(appId, appUserId);
  if (!connection) throw new ApiError("not_connected", `user ${JSON.stringify(appUserId)} has not approved a budget for this app`);
  if (connection.fundingStatus === "invalid") {
    throw new ApiError("funding_invalid", "the upstream refused payment for this user's requests; the user must approve again");
  }
  const period = periodAt(deps.clock.now());
  return {
    account: userAccount(appId, period.id, appUserId),
    capNano: connection.monthlyCapNano,
    appId,
    appUserId,
    grantId: null,
    period,
    resetsAt: period.end,
    markFundingInvalid: () => deps.store.connections.markFundingInvalid(appId, appUserId, deps.clock.now()),
  };
}

/** 402 budget_exceeded (grant_invalid for a grant) with what a program needs to act on it. */
export function budgetExceeded(target: BudgetTarget, counters: BudgetSnapshot & { frozen?: true }): ApiError {
  const remaining = counters.frozen ? 0 : Math.max(0, target.capNano - counters.spentNano - counters.reservedNano);
  const code = target.grantId ? "grant_invalid" : "budget_exceeded";
  const details: BudgetErrorDetails = {
    limitUsd: nanoToUsd(target.capNano),
    usedUsd: nanoToUsd(counters.spentNano),
    remainingUsd: nanoToUsd(remaining),
    resetsAt: target.resetsAt,
  };
  return new ApiError(code, refusalMessage(target, counters.frozen === true), { ...details });
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
