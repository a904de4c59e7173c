import type { SettleBarrier } from "../metering/meter";
import type { BudgetLedger } from "../budget/ledger";
import type { Clock } from "../clock";
import type { Config } from "../config";
import { ApiError } from "../errors";
import { nanoToUsd, periodAt, usdAmountToNano, type Period } from "../money";
import { userAccount } from "../budget/accounts";
import type { Connection, ConnectionRepository, FundingSource, FundingStatus } from "../store/connections";
import type { SessionClaims } from "../auth/session-token";
import type { AppRepository } from "../store/apps";
import type { UpstreamCredit, UpstreamCreditReader } from "./upstream-credit";

export interface StatusView {
  connected: boolean;
  limits: { monthlyUsd: number };
  usage: { monthlyUsd: number };
  remainingUsd: number;
  period: { start: string; end: string };
  resetsAt: string;
  /** Who pays the user's calls; `app` while not connected. Never the key. */
  fundingSource: FundingSource;
  /** What the upstream says is left on the user's own key (src/services/upstream-credit.ts); null unless the user pays. */
  upstreamCredit: UpstreamCredit | null;
}

export interface ConnectionStatusView extends StatusView {
  appUserId: string;
  fundingStatus: FundingStatus;
  connectedAt: string | null;
  updatedAt: string | null;
}

/** A user's connection to an app: approve, update, read, revoke; and the budget view of it. */
export class ConnectionService {
  constructor(
    private readonly connections: ConnectionRepository,
    private readonly budget: Pick<BudgetLedger, "snapshot">,
    /** This process's settles under way: a status read waits for them, so it shows a call just answered. */
    private readonly settles: SettleBarrier,
    private readonly clock: Clock,
    private readonly config: Pick<Config, "maxMonthlyUsd">,
    private readonly apps: Pick<AppRepository, "find">,
    private readonly credit: Pick<UpstreamCreditReader, "creditOf">,
  ) {}

  async status(appId: string, appUserId: string): Promise<StatusView> {
    const { view } = await this.describe(appId, appUserId);
    return view;
  }

  async connectionStatus(appId: string, appUserId: string): Promise<ConnectionStatusView> {
    const { view, connection } = await this.describe(appId, appUserId);
    return {
      ...view,
      appUserId,
      fundingStatus: connection?.fundingStatus ?? "ok",
      connectedAt: connection ? new Date(connection.connectedAt).toISOString() : null,
      updatedAt: connection ? new Date(connection.updatedAt).toISOString() : null,
    };
  }

  /**
   * Approves or updates the cap (capNano says which). An app whose users may not be paid
   * for by the operator (its funding sources lack `app`) gets no connection this way: its
   * users link their own account (FundingLinkService). A connection the user already pays
   * for may keep or lower its cap here, and stays paid by the user; raising it is refused
   * (see `refuseRaiseOnUserKey`).
   */
  async approve(session: SessionClaims, monthlyUsd: number | undefined): Promise<ConnectionStatusView> {
    const { appId, appUserId } = session;
    const current = await this.connections.findActive(appId, appUserId);
    const capNano = this.capNano(session, monthlyUsd, current);
    if (current?.fundingSource === "user") refuseRaiseOnUserKey(current, capNano);
    else await this.requireFundingSource(appId, "app");
    await this.connections.approve(appId, appUserId, capNano, this.clock.now());
    return this.connectionStatus(appId, appUserId);
  }

  /**
   * The cap an approval sets: the body's value, else the token's requested limit, else (on
   * update) the current cap. It may not exceed the token's requested limit nor the
   * configured maximum.
   */
  capNano(session: SessionClaims, monthlyUsd: number | undefined, current: Connection | null): number {
    const { requestLimitUsd } = session;
    const capUsd = monthlyUsd ?? requestLimitUsd ?? (current ? nanoToUsd(current.monthlyCapNano) : undefined);
    if (capUsd === undefined) {
      throw new ApiError("invalid_request", "monthlyUsd is required: neither the body nor the session token names a limit");
    }
    if (requestLimitUsd !== null && capUsd > requestLimitUsd) {
      throw new ApiError("invalid_request", `monthlyUsd may not exceed the limit the app requested (${requestLimitUsd})`);
    }
    const max = this.config.maxMonthlyUsd;
    if (capUsd > max) throw new ApiError("invalid_request", `monthlyUsd may not exceed ${max}`);
    return usdAmountToNano(capUsd, { rounding: "floor" }, (problem) => new ApiError("invalid_request", `monthlyUsd ${problem}`));
  }

  /** Refuses (400) when the app's operator has not let its users be funded by `source`. */
  async requireFundingSource(appId: string, source: FundingSource): Promise<void> {
    const app = await this.apps.find(appId);
    const sources = app?.fundingSources ?? [];
    if (sources.includes(source)) return;
    const refusal =
      source === "user"
        ? "this app's users may not pay with their own upstream account: its operator allows only the app's funding"
        : "this app's users pay with their own upstream account: link one with POST /connections/funding";
    throw new ApiError("invalid_request", `${refusal} (funding sources: ${sources.join(", ") || "none"})`);
  }

  async revoke(appId: string, appUserId: string): Promise<void> {
    await this.connections.revoke(appId, appUserId, this.clock.now());
  }

  private async describe(appId: string, appUserId: string): Promise<{ view: StatusView; connection: Connection | null }> {
    const period = periodAt(this.clock.now());
    const connection = await this.connections.findActive(appId, appUserId);
    await this.settles.settled();
    const { spentNano, reservedNano } = await this.budget.snapshot(userAccount(appId, period.id, appUserId));
    const capNano = connection?.monthlyCapNano ?? 0;
    const view = {
      ...budgetView(connection !== null, capNano, spentNano, reservedNano, period),
      fundingSource: connection?.fundingSource ?? "app",
      upstreamCredit: await this.credit.creditOf(connection),
    };
    return { view, connection };
  }
}

/**
 * A user's own key was made with the cap as its monthly credit limit (FundingLinkService), so
 * a cap raised without a new key would admit calls the upstream then refuses. Raising it
 * therefore takes the link flow again (POST /connections/funding with the new cap, which the
 * connect page runs when the user pays), which makes a key with the new limit: this answer
 * can only tell the app so, since the flow needs the user on the upstream's page.
 */
function refuseRaiseOnUserKey(current: Connection, capNano: number): void {
  if (capNano <= current.monthlyCapNano) return;
  throw new ApiError(
    "invalid_request",
    `monthlyUsd: this user pays with their own upstream account, whose key was made with the cap (${nanoToUsd(current.monthlyCapNano)}) as its monthly limit; ` +
      "to raise it, link the account again with the new cap (POST /connections/funding, as the connect page does)",
  );
}

/**
 * The budget numbers as the API shows them. `usage` is settled spend; `remainingUsd` is
 * what a new request can still draw on, so it also subtracts in-flight reservations.
 */
export function budgetView(
  connected: boolean,
  capNano: number,
  spentNano: number,
  reservedNano: number,
  period: Period,
): Omit<StatusView, "fundingSource" | "upstreamCredit"> {
  return {
    connected,
    limits: { monthlyUsd: nanoToUsd(capNano) },
    usage: { monthlyUsd: nanoToUsd(spentNano) },
    remainingUsd: nanoToUsd(Math.max(0, capNano - spentNano - reservedNano)),
    period: { start: period.start, end: period.end },
    resetsAt: period.end,
  };
}
