import { nanoToUsd } from "../../money";
import type { Grant } from "../../store/grants";
import { isoOrNull, isoTime, notFound, requireApp, type OperatorContext } from "./input";
import { decodeCursor, pageOf, pageSize, type PageRequest } from "./paging";
import type { GrantView, Page, RevokedGrantView } from "./views";

const isGrantKey = (value: unknown): value is [number, string] =>
  Array.isArray(value) && value.length === 2 && Number.isSafeInteger(value[0]) && typeof value[1] === "string";

/** An app's one-time grants: list (never their tokens, which are stored only hashed) and revoke. */
export class GrantOperations {
  constructor(private readonly context: OperatorContext) {}

  /** Oldest first. */
  async list(appId: string, request: PageRequest = {}): Promise<Page<GrantView>> {
    const { names, store } = this.context;
    const limit = pageSize(names, request);
    const after = request.cursor === undefined ? undefined : decodeCursor(names, request.cursor, isGrantKey);
    await requireApp(this.context, appId);
    const rows = await store.grants.listForApp(appId, limit + 1, after && { createdAt: after[0], id: after[1] });
    return pageOf(rows, limit, (g) => [g.createdAt, g.id], view);
  }

  /** Calls with the grant's token are refused at once. */
  async revoke(appId: string, grantId: string): Promise<RevokedGrantView> {
    await requireApp(this.context, appId);
    const grant = await this.context.store.grants.find(grantId);
    // Another app's grant is "not found" too: its id tells this app nothing.
    if (!grant || grant.appId !== appId) throw notFound(`no grant ${grantId} of app ${appId}`);
    await this.context.store.grants.revoke(grantId, this.context.clock.now());
    return { appId, grantId, revoked: true };
  }
}

const view = (g: Grant): GrantView => ({
  grantId: g.id,
  usd: nanoToUsd(g.usdCapNano),
  uses: g.uses,
  maxUses: g.maxUses,
  origin: g.origin,
  createdAt: isoTime(g.createdAt),
  expiresAt: isoTime(g.expiresAt),
  revokedAt: isoOrNull(g.revokedAt),
});
