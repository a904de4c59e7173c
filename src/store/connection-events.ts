import { nanoToUsd } from "../money";
import type { Connection } from "./connections";
import type { WebhookEventDraft } from "./webhooks";

/**
 * The webhook events a connection change causes. Both engines' repositories record them in
 * the transaction that makes the change, so the event exists exactly when the change does.
 */

/** `connection.approved` for a new (or re-approved after a revoke) connection, else `connection.updated`. */
export function approvalEvent(before: Connection | null, after: Connection): WebhookEventDraft {
  const common = { appId: after.appId, userId: after.appUserId, monthlyUsd: nanoToUsd(after.monthlyCapNano) };
  if (!before || before.revokedAt !== null) {
    return { appId: after.appId, type: "connection.approved", data: { ...common, connectedAt: new Date(after.connectedAt).toISOString() } };
  }
  return {
    appId: after.appId,
    type: "connection.updated",
    data: {
      ...common,
      previousMonthlyUsd: nanoToUsd(before.monthlyCapNano),
      fundingRestored: before.fundingStatus === "invalid" && after.fundingStatus === "ok",
    },
  };
}

export const revokedEvent = (appId: string, appUserId: string): WebhookEventDraft => ({
  appId,
  type: "connection.revoked",
  data: { appId, userId: appUserId },
});

/** The upstream refused payment for the user's calls; the user must approve again. */
export const fundingInvalidEvent = (appId: string, appUserId: string): WebhookEventDraft => ({
  appId,
  type: "funding.invalid",
  data: { appId, userId: appUserId },
});
