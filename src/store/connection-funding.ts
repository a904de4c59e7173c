/**
 * What an approval does to a connection's funding, decided once for both engines: each reads
 * the row as it was (inside the approval's transaction) and writes these columns.
 */
import { sealedContext, type SecretBox } from "../secrets/secret-box";
import { sealFenced } from "./key-fence";
import { userKeyFingerprint, type Connection, type FundingChoice, type FundingSource, type FundingStatus } from "./connections";

/** The funding columns of a connection row. */
export interface FundingColumns {
  source: FundingSource;
  /** The user key, sealed (`enc:v1:…`), bound to its connection. */
  sealedKey: string | null;
  fingerprint: string | null;
  linkedAt: number | null;
  status: FundingStatus;
}

/** The row before the approval: what it keeps when the approval names no funding. */
export interface FundingBefore extends FundingColumns {
  revoked: boolean;
}

const APP_FUNDED: Omit<FundingColumns, "status"> = { source: "app", sealedKey: null, fingerprint: null, linkedAt: null };

/**
 * `storedCheck`: the store's key check as the approval's transaction read it, for the key
 * fence (src/store/key-fence.ts); only a new user key is sealed, so only then is it needed.
 */
export function fundingAfterApproval(
  before: FundingBefore | null,
  funding: FundingChoice | undefined,
  box: SecretBox,
  storedCheck: () => string | null,
  appId: string,
  appUserId: string,
  now: number,
): FundingColumns {
  if (funding?.source === "user") {
    const sealedKey = sealFenced(box, storedCheck(), funding.upstreamKey, sealedContext.connectionUserKey(appId, appUserId));
    return { source: "user", sealedKey, fingerprint: userKeyFingerprint(funding.upstreamKey), linkedAt: now, status: "ok" };
  }
  // Kept: an active connection the user pays for, approved again (a new cap) without a new
  // key. Its status too: a key the upstream refused stays refused until another is linked.
  if (funding === undefined && before && !before.revoked && before.source === "user") {
    return { source: "user", sealedKey: before.sealedKey, fingerprint: before.fingerprint, linkedAt: before.linkedAt, status: before.status };
  }
  return { ...APP_FUNDED, status: "ok" };
}

/** The connection's funding fields as the contract shows them (never the sealed key). */
export function fundingFields(columns: Omit<FundingColumns, "sealedKey">): Pick<Connection, "fundingSource" | "fundingStatus" | "userKey"> {
  const { source, fingerprint, linkedAt, status } = columns;
  return {
    fundingSource: source,
    fundingStatus: status,
    userKey: source === "user" && fingerprint !== null && linkedAt !== null ? { fingerprint, linkedAt } : null,
  };
}
