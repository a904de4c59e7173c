import { isoOrNull, isoTime, notFound, requireApp, type OperatorContext } from "./input";
import { issueKey } from "./secret-keys";
import type { IssuedKeyView, KeyView, RevokedKeyView } from "./views";

/** An app's secret keys: several at once, so a key is rotated without downtime. */
export class KeyOperations {
  constructor(private readonly context: OperatorContext) {}

  /** Ids and dates of every key, revoked ones included; never a secret (only hashes are kept). */
  async list(appId: string): Promise<KeyView[]> {
    await requireApp(this.context, appId);
    const keys = await this.context.store.apps.keysOf(appId);
    return keys.map((k) => ({ appId, keyId: k.id, createdAt: isoTime(k.createdAt), revokedAt: isoOrNull(k.revokedAt) }));
  }

  /** A new key, shown this once; older keys stay valid until revoked. */
  async rotate(appId: string): Promise<IssuedKeyView> {
    await requireApp(this.context, appId);
    const key = await issueKey(this.context.store.apps, appId, this.context.clock.now());
    return { appId, keyId: key.keyId, secretKey: key.secretKey };
  }

  /** Revokes one key, on every instance at once. */
  async revoke(appId: string, keyId: string): Promise<RevokedKeyView> {
    if (!(await this.context.store.apps.revokeKey(appId, keyId, this.context.clock.now()))) throw notFound(`no active key ${keyId} for app ${appId}`);
    return { appId, keyId, revoked: true };
  }
}
