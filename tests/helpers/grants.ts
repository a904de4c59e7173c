import type { GrantRepository } from "../../src/store/grants";

/** approveConsent where the test needs a grant: anything but an approval throws. */
export async function approveConsentOrThrow(grants: GrantRepository, consentToken: string, now: number) {
  const approval = await grants.approveConsent(consentToken, now);
  if (approval.kind !== "approved") throw new Error(`expected an approval, got ${JSON.stringify(approval)}`);
  return approval;
}
