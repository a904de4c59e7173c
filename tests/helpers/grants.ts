import type { DailyCeiling, GrantRepository } from "../../src/store/grants";

/** A daily ceiling no test grant reaches, for tests about something else. */
export const NO_DAILY_CEILING: DailyCeiling = { dayStart: 0, defaultNano: Number.MAX_SAFE_INTEGER };

/** approveConsent where the test needs a grant: anything but an approval throws. */
export async function approveConsentOrThrow(grants: GrantRepository, consentToken: string, now: number, ceiling = NO_DAILY_CEILING) {
  const approval = await grants.approveConsent(consentToken, now, ceiling);
  if (approval.kind !== "approved") throw new Error(`expected an approval, got ${JSON.stringify(approval)}`);
  return approval;
}
