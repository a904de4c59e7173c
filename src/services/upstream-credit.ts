import type { Clock } from "../clock";
import type { UpstreamClient } from "../upstream/client";
import type { Connection } from "../store/connections";

/** What the upstream says is left on a user's own key (GET /key): USD, each null when the key has no limit. */
export interface UpstreamCredit {
  remainingUsd: number | null;
  limitUsd: number | null;
}

/** How long an answer of the upstream's key endpoint is shown again: status reads come in bursts (a page polling, a backend checking before each call). */
export const UPSTREAM_CREDIT_TTL_MS = 30_000;
/** Connections remembered at most; the oldest is forgotten first. */
const MAX_REMEMBERED = 10_000;

/**
 * The upstream's own credit on a user-funded connection's key, for status answers (issue 34:
 * a field apart from `remainingUsd`, which stays the cap minus usage). Read with the user's
 * key, opened for that read alone; kept UPSTREAM_CREDIT_TTL_MS per connection and key (a
 * relinked key is read afresh). A failure of the upstream (down, or refusing the key) is null,
 * never an error of the status read, and is kept as briefly, so a refusing upstream is not
 * asked on every read. A key that does not open (SealedSecretError: the secrets key, or the
 * row) is the service's own fault, as on the call it would pay for: it fails the read (the
 * envelope's 500, logged by the error handler), and is not kept.
 */
export class UpstreamCreditReader {
  private readonly remembered = new Map<string, { until: number; credit: Promise<UpstreamCredit | null> }>();

  constructor(
    private readonly upstream: Pick<UpstreamClient, "keyInfo">,
    private readonly openUserKey: (appId: string, appUserId: string) => Promise<string | null>,
    private readonly clock: Clock,
  ) {}

  /** Null unless the user pays with a linked key of their own and the upstream told what is left on it. */
  creditOf(connection: Connection | null): Promise<UpstreamCredit | null> {
    if (!connection || connection.fundingSource !== "user" || !connection.userKey) return Promise.resolve(null);
    const { appId, appUserId } = connection;
    const id = JSON.stringify([appId, appUserId, connection.userKey.fingerprint]);
    const now = this.clock.now();
    const kept = this.remembered.get(id);
    if (kept && kept.until > now) return kept.credit;
    this.remembered.delete(id);
    if (this.remembered.size >= MAX_REMEMBERED) this.remembered.delete(this.remembered.keys().next().value!);
    const credit = this.read(appId, appUserId);
    this.remembered.set(id, { until: now + UPSTREAM_CREDIT_TTL_MS, credit });
    credit.catch(() => {
      if (this.remembered.get(id)?.credit === credit) this.remembered.delete(id);
    });
    return credit;
  }

  private async read(appId: string, appUserId: string): Promise<UpstreamCredit | null> {
    const key = await this.openUserKey(appId, appUserId);
    if (key === null) return null;
    try {
      return await this.upstream.keyInfo(key);
    } catch {
      return null;
    }
  }
}
