import { userAccount } from "../../budget/accounts";
import { nanoToUsd, periodAt } from "../../money";
import type { Connection } from "../../store/connections";
import { isoOrNull, isoTime, notFound, requireApp, type OperatorContext } from "./input";
import { decodeCursor, pageOf, pageSize, type PageRequest } from "./paging";
import type { ConnectionDetailsView, ConnectionView, Page, RevokedConnectionView } from "./views";

const isUserKey = (value: unknown): value is [string] => Array.isArray(value) && value.length === 1 && typeof value[0] === "string";

/** The monthly caps an app's users approved: list, show with this month's spend, revoke. */
export class UserConnectionOperations {
  constructor(private readonly context: OperatorContext) {}

  /** Active and revoked, by user id. */
  async list(appId: string, request: PageRequest = {}): Promise<Page<ConnectionView>> {
    const { names, store } = this.context;
    const limit = pageSize(names, request);
    const after = request.cursor === undefined ? undefined : decodeCursor(names, request.cursor, isUserKey)[0];
    await requireApp(this.context, appId);
    const rows = await store.connections.listForApp(appId, limit + 1, after);
    return pageOf(rows, limit, (c) => [c.appUserId], view);
  }

  async show(appId: string, appUserId: string): Promise<ConnectionDetailsView> {
    await requireApp(this.context, appId);
    const c = await this.context.store.connections.find(appId, appUserId);
    if (!c) throw notFound(`no connection for user ${appUserId} of app ${appId}`);
    const period = periodAt(this.context.clock.now());
    const spent = await this.context.store.usageTotals.spentNano(userAccount(appId, period.id, appUserId));
    return {
      appUserId,
      monthlyUsd: nanoToUsd(c.monthlyCapNano),
      usedUsd: nanoToUsd(spent),
      period: period.id,
      fundingStatus: c.fundingStatus,
      fundingSource: c.fundingSource,
      userKey: c.userKey && { fingerprint: c.userKey.fingerprint, linkedAt: isoTime(c.userKey.linkedAt) },
      connectedAt: isoTime(c.connectedAt),
      updatedAt: isoTime(c.updatedAt),
      revokedAt: isoOrNull(c.revokedAt),
    };
  }

  /** The user's calls are refused at once (402 not_connected) until they approve again; a linked user key is deleted. */
  async revoke(appId: string, appUserId: string): Promise<RevokedConnectionView> {
    await requireApp(this.context, appId);
    if (!(await this.context.store.connections.findActive(appId, appUserId))) throw notFound(`no active connection for user ${appUserId} of app ${appId}`);
    await this.context.store.connections.revoke(appId, appUserId, this.context.clock.now());
    return { appId, appUserId, revoked: true };
  }
}

const view = (c: Connection): ConnectionView => ({
  appUserId: c.appUserId,
  monthlyUsd: nanoToUsd(c.monthlyCapNano),
  fundingStatus: c.fundingStatus,
  fundingSource: c.fundingSource,
  connectedAt: isoTime(c.connectedAt),
  revokedAt: isoOrNull(c.revokedAt),
});
